"""The claim/write benchmark of ADR 0042 and docs/benchmarks.md#levers at a reduced size, so that its four
shapes keep running against the current schema and statements. Its speed figures are
printed, not asserted (CI machines are not benchmark machines); that each shape claimed
and wrote every run exactly once is checked by the script itself against the database's
counts, and the premise of the heap-only shape (its claims write no index entry) here."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

from tests.support.processes import clean_env

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_claim_write.py"


@pytest.mark.benchmark
async def test_every_shape_claims_and_writes_each_run_once(database_url: str) -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(SCRIPT), "--runs", "600", "--batch", "64", "--prepare", "vacuum",
        "--dsn", database_url,
        env=clean_env(), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout=150)
    assert proc.returncode == 0, err.decode()[-2000:]
    rounds = [json.loads(line) for line in out.decode().splitlines()]
    print("bench_claim_write.py (reduced):", *rounds, sep="\n")
    shapes = {r["shape"]: r for r in rounds}
    assert list(shapes) == ["production", "status", "lease-table", "hot-lease"]
    for r in rounds:
        # (WAL is not asserted: the suite's server may log little of it.)
        assert r["runs"] == 600 and r["runs_per_second"] > 0
    # Every claim and write that moves the status is a full update (new index entries)...
    assert shapes["production"]["hot_update_share"] == 0.0
    assert shapes["status"]["hot_update_share"] == 0.0
    # ...while the lease in unindexed columns, on pages with room, is heap-only: the claim's
    # half of the updates (the terminal write moves the status), nearly all of them (a
    # page can be short of room now and then: 0.493 and 0.499 seen).
    assert shapes["hot-lease"]["fillfactor"] == 50
    assert 0.45 <= shapes["hot-lease"]["hot_update_share"] <= 0.5


@pytest.mark.benchmark
@pytest.mark.parametrize(("args", "message"), [
    (("--shapes", "status,nope"), "--shapes: unknown ['nope']"),
    (("--fillfactor", "5"), "--fillfactor: 5 is not between 10 and 100"),
])
async def test_bad_arguments_are_refused_in_one_line(
    database_url: str, args: tuple[str, ...], message: str
) -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(SCRIPT), *args, "--dsn", database_url,
        env=clean_env(), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout=60)
    assert proc.returncode == 2 and out == b""
    assert message in err.decode()
