"""Per claimed row: what turning claim rows into ClaimedRuns costs, the branch base's
``claimed_runs`` against this tree's, in one process (ADR 0061).

A burst of distinct schedules (no schedule repeats, as in `cronwire loadtest --scenario
burst`): every row carries its own sealed signing secret. The base is the module as it was
at ``--base`` (read with ``git show``, run against this tree's domain), fed the same rows
with the secrets in clear, as they were stored before sealing. Rounds alternate base and
branch, claims of ``--batch`` rows, the garbage collector on (what a replica pays); the
figures are the process's CPU time.

    PYTHONPATH=src python benchmarks/bench_claim_rows.py --rows 20000 --rounds 7
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import statistics
import subprocess
import sys
import time
import types
import uuid
from collections.abc import Callable, Collection, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from cronwire.adapters.crypto.envelope import EnvelopeSecretBox
from cronwire.adapters.crypto.key_ring import KeyRing
from cronwire.adapters.postgres import claim_source
from cronwire.domain.secrets import DataKeyRecord, schedule_secret_context

BASE = "8fc7c91^"  # main before the sealed secrets landed
TARGET = json.dumps({"url": "http://127.0.0.1:9/hook", "method": "POST", "headers": {},
                     "body": None})
RETRY = json.dumps({"max_attempts": 3, "initial_backoff_seconds": 0.05,
                    "max_backoff_seconds": 0.2})


class MemoryDataKeys:
    """A DataKeyStore in a dict: the benchmark times the claim's CPU, not Postgres."""

    def __init__(self) -> None:
        self._rows: dict[uuid.UUID, DataKeyRecord] = {}

    async def for_tenants(self, tenant_ids: Collection[uuid.UUID]) -> Sequence[DataKeyRecord]:
        return [self._rows[t] for t in tenant_ids if t in self._rows]

    async def insert_if_absent(self, record: DataKeyRecord) -> DataKeyRecord:
        return self._rows.setdefault(record.tenant_id, record)

    async def count_by_key_id(self) -> Mapping[str, int]:
        return {}

    async def not_wrapped_by(self, key_id: str, after: uuid.UUID | None,
                             limit: int) -> Sequence[DataKeyRecord]:
        return []

    async def rewrap(self, rewrapped: Sequence[tuple[DataKeyRecord, DataKeyRecord]]) -> int:
        return 0

    async def one_per_key_id(self) -> Sequence[DataKeyRecord]:
        return []


def base_module(rev: str) -> types.ModuleType:
    source = subprocess.run(["git", "show", f"{rev}:src/cronwire/adapters/postgres/claim_source.py"],
                            capture_output=True, text=True, check=True).stdout
    module = types.ModuleType("base_claim_source")
    exec(compile(source, "base_claim_source.py", "exec"), module.__dict__)
    return module


async def make_rows(box: EnvelopeSecretBox, count: int, tenants: int
                    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(base rows with clear secrets, branch rows with sealed ones), same runs."""
    tenant_ids = [uuid.uuid4() for _ in range(tenants)]
    now = datetime.now(UTC)
    base, sealed = [], []
    for i in range(count):
        tenant_id, schedule_id = tenant_ids[i % tenants], uuid.uuid4()
        secret = f"whsec_{uuid.uuid4().hex}"
        row = {"status": "running", "id": uuid.uuid4(), "tenant_id": tenant_id,
               "schedule_id": schedule_id, "scheduled_for": now, "idempotency_key": f"k{i}",
               "trigger": "schedule", "attempt_count": 1, "target_json": TARGET,
               "retry_json": RETRY, "signing_secret": secret,
               "previous_signing_secret": None, "claim_expires_at": now + timedelta(seconds=30),
               "lease_generation": 1, "replay_of_scheduled_for": None, "flow": None,
               "cancel_other": False}
        base.append(row)
        sealed.append({**row, "signing_secret": await box.seal(
            tenant_id, secret, schedule_secret_context(schedule_id))})
    return base, sealed


def branch_claim(rows: list[dict[str, Any]], opener: claim_source.ClaimOpener) -> object:
    """What PostgresClaimSource.claim does after the fetch: ``prepare`` (its data keys are
    loaded, so it finishes without awaiting: driven here without a loop), then the rows."""
    step = opener.prepare(rows)  # type: ignore[arg-type]
    try:
        step.send(None)
    except StopIteration:
        pass
    else:
        raise RuntimeError("prepare waited for I/O: the data keys were not loaded")
    return claim_source.claimed_runs(rows, opener)  # type: ignore[arg-type]


def timed(run: Callable[[list[dict[str, Any]]], object], rows: list[dict[str, Any]],
          batch: int) -> float:
    """CPU µs a row over every claim of ``batch`` rows (process time: on a shared machine
    the wall clock also counts the time other processes hold the core)."""
    started = time.process_time()
    for at in range(0, len(rows), batch):
        run(rows[at:at + batch])
    return (time.process_time() - started) / len(rows) * 1e6


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--tenants", type=int, default=100)
    parser.add_argument("--batch", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--base", default=BASE)
    args = parser.parse_args()
    box = EnvelopeSecretBox(KeyRing([("bench", b"k" * 32)]), MemoryDataKeys())
    base_rows, sealed_rows = await make_rows(box, args.rows, args.tenants)
    await box.load({row["tenant_id"] for row in sealed_rows})
    old = base_module(args.base)
    before: list[float] = []
    after: list[float] = []
    for _ in range(args.rounds):
        gc.collect()
        before.append(timed(old.claimed_runs, base_rows, args.batch))
        opener = claim_source.ClaimOpener(box)  # a fresh replica: nothing opened yet
        gc.collect()
        after.append(timed(lambda rows, o=opener: branch_claim(rows, o),
                           sealed_rows, args.batch))
    print(f"{args.rows} rows of distinct schedules, {args.tenants} tenants, claims of "
          f"{args.batch}, {args.rounds} rounds (µs a row, median and range):")
    print(f"  load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    for name, figures in (("base", before), ("branch", after)):
        print(f"  {name:7} {statistics.median(figures):6.2f}  "
              f"({min(figures):.2f}-{max(figures):.2f})")
    # The minimum is the least disturbed round on a shared machine.
    print(f"  extra   {statistics.median(after) - statistics.median(before):6.2f} "
          f"(of the minima: {min(after) - min(before):.2f})")


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
