"""Other tenants' fire lag while one tenant's 10,000-run backfill drains.

Real `cronwire serve` replicas (planner + executor) on a real Postgres deliver to the load
test's sink (a separate process). ``--tenants`` tenants each have ``--schedules`` schedules
firing every second for ``--duration`` seconds. Part-way through, one more tenant
backfills ``--backfill`` occurrences of its schedule (the same call the API's POST
/v1/schedules/{id}/backfill makes): every one of those runs is due at once.

From the sink's records (webhook-id -> arrival time), the other tenants' fire lag (arrival
minus scheduled_for) is reported for the occurrences due before the backfill, while it
drained, and after; and the backfill's drain time and rate. Prints one JSON line (and writes
it to OUT/report.json).

    python benchmarks/bench_backfill_fairness.py [--tenants 20] [--schedules 10]
        [--backfill 10000] [--replicas 1] [--duration 60] [--out DIR] [--dsn ...]

Without --dsn an embedded Postgres with durable settings (fsync on) runs in a temp dir.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
import uuid
from datetime import datetime, timedelta
from pathlib import Path

import aiohttp

from cronwire.adapters.embedded.postgres import throwaway_cluster
from cronwire.adapters.postgres.run_commands import PostgresRunCommands
from cronwire.adapters.postgres.schedule_store import PostgresScheduleStore
from cronwire.bootstrap.factories import fresh_database, open_pool
from cronwire.bootstrap.factories import secret_box as harness_box
from cronwire.domain.backfill import BackfillRequest, plan_backfill
from cronwire.domain.cron import occurrences_between
from cronwire.domain.model import RetryPolicy, Target, idempotency_key_for, run_id_for
from cronwire.domain.schedules import ScheduleSpec
from cronwire.harness.fleet import HARNESS_SECRET_KEYS, Fleet, replica_env
from cronwire.harness.seeding import seed_tenant
from cronwire.harness.sink_process import SinkProcess
from cronwire.loadtest.setup import database_name

WARMUP_SECONDS = 15.0
CRON = "* * * * * *"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--tenants", type=int, default=20, help="other tenants")
    parser.add_argument("--schedules", type=int, default=10, help="per other tenant, 1/s each")
    parser.add_argument("--backfill", type=int, default=10_000, help="occurrences backfilled")
    parser.add_argument("--after", type=float, default=15.0,
                        help="seconds into the firing window when the backfill is made")
    parser.add_argument("--replicas", type=int, default=1)
    parser.add_argument("--workers", type=int, default=256, help="SCHEDULER_EXECUTOR_WORKERS")
    parser.add_argument("--duration", type=float, default=60.0, help="seconds of firing")
    parser.add_argument("--dsn", help="an existing server's admin DSN (default: embedded)")
    parser.add_argument("--out", type=Path, help="write report.json here")
    return parser.parse_args(argv)


def _percentile(values: list[float], fraction: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(fraction * (len(ordered) - 1))))]


def _figures(lags: list[float]) -> dict[str, object]:
    def ms(value: float | None) -> float | None:
        return None if value is None else round(value * 1000, 1)

    return {"runs": len(lags), "p50_ms": ms(_percentile(lags, 0.5)),
            "p99_ms": ms(_percentile(lags, 0.99)), "max_ms": ms(max(lags, default=None))}


async def seed(dsn: str, args: argparse.Namespace, url: str,
               ) -> tuple[dict[str, tuple[str, datetime]], uuid.UUID, uuid.UUID, datetime]:
    """Other tenants' schedules and the backfilling tenant's (paused: only the backfill
    makes its runs). Returns (webhook-id -> (kind, scheduled_for)), the backfill tenant and
    schedule, and the first instant."""
    pool = await open_pool(dsn, 4)
    store = PostgresScheduleStore(pool, harness_box(pool, HARNESS_SECRET_KEYS))
    planned: dict[str, tuple[str, datetime]] = {}
    try:
        now: datetime = await pool.fetchval("SELECT now()")
        first = (now + timedelta(seconds=WARMUP_SECONDS)).replace(microsecond=0)
        last = first + timedelta(seconds=args.duration) - timedelta(microseconds=1)
        instants = occurrences_between(CRON, "UTC", first - timedelta(microseconds=1), last,
                                       1_000_000)
        for t in range(args.tenants):
            tenant = await seed_tenant(pool, f"other-{t}")
            for s in range(args.schedules):
                spec = ScheduleSpec(name=f"o{t}-{s}", cron=CRON, target=Target(url),
                                    retry=RetryPolicy(3, 1, 5), starts_at=first, ends_at=last)
                record = await store.create(tenant, spec, paused=False,
                                            signing_secret="whsec_" + "M" * 32,
                                            max_schedules=10_000)
                for at in instants:
                    planned[idempotency_key_for(run_id_for(record.id, at))] = ("other", at)
        backfiller = await seed_tenant(pool, "backfiller")
        spec = ScheduleSpec(name="history", cron=CRON, target=Target(url),
                            retry=RetryPolicy(3, 1, 5))
        record = await store.create(backfiller, spec, paused=True,
                                    signing_secret="whsec_" + "M" * 32, max_schedules=10)
        return planned, backfiller, record.id, first
    finally:
        await pool.close()


async def backfill(dsn: str, tenant: uuid.UUID, schedule_id: uuid.UUID, count: int,
                   ) -> tuple[list[datetime], datetime, float]:
    """The backfill, as the API makes it; (its occurrences, the database's now, seconds)."""
    pool = await open_pool(dsn, 2)
    try:
        now: datetime = await pool.fetchval("SELECT date_trunc('second', now())")
        start = now - timedelta(hours=2) - timedelta(seconds=count)
        request = BackfillRequest(start, start + timedelta(seconds=count))
        began = time.monotonic()
        result = await PostgresRunCommands(pool).backfill(
            tenant, schedule_id, lambda spec, db_now, oldest: plan_backfill(
                spec, request, db_now, oldest), dry_run=False, max_pending_runs=count)
        seconds = time.monotonic() - began
        assert result.created == count, result
        occurrences = occurrences_between(CRON, "UTC", start - timedelta(microseconds=1),
                                          start + timedelta(seconds=count - 1), count)
        return occurrences, now, seconds
    finally:
        await pool.close()


def analyse(records: Path, planned: dict[str, tuple[str, datetime]], made_at: float,
            ) -> dict[str, object]:
    acked: dict[str, float] = {}
    duplicates = 0
    for line in records.read_text().splitlines():
        record = json.loads(line)
        if record["id"] in acked:
            duplicates += 1
        else:
            acked[record["id"]] = float(record["at"])
    backfill_acks = [at for wid, at in acked.items() if planned.get(wid, ("", None))[0] == "backfill"]
    done_at = max(backfill_acks, default=made_at)
    phases: dict[str, list[float]] = {"before": [], "during": [], "after": []}
    for wid, (kind, due) in planned.items():
        at = acked.get(wid)
        if kind != "other" or at is None:
            continue
        due_s = due.timestamp()
        phase = "before" if due_s < made_at else "during" if due_s <= done_at else "after"
        phases[phase].append(at - due_s)
    others = sum(1 for kind, _ in planned.values() if kind == "other")
    return {
        "other_tenants": {name: _figures(lags) for name, lags in phases.items()},
        "other_lost": others - sum(len(v) for v in phases.values()),
        "backfill": {"runs": len(backfill_acks),
                     "drain_seconds": round(done_at - made_at, 2),
                     "runs_per_second": round(len(backfill_acks) / max(done_at - made_at, 1e-9), 1)},
        "duplicates": duplicates,
    }


async def main_async(args: argparse.Namespace, admin_dsn: str, out: Path) -> dict[str, object]:
    dsn = await fresh_database(admin_dsn, database_name("fairness"))
    sink = await SinkProcess(out / "deliveries.jsonl").start()
    (out / "replicas").mkdir(exist_ok=True)
    try:
        async with Fleet(out / "replicas") as fleet, aiohttp.ClientSession() as http:
            for index in range(args.replicas):
                await fleet.launch(f"fair-{index}", replica_env(
                    dsn, roles="planner,executor", executor_workers=args.workers))
            planned, tenant, schedule_id, first = await seed(dsn, args, sink.url)
            await asyncio.sleep(max(0.0, first.timestamp() + args.after - time.time()))
            made_at = time.time()
            occurrences, _, insert_seconds = await backfill(dsn, tenant, schedule_id,
                                                            args.backfill)
            for at in occurrences:
                planned[idempotency_key_for(run_id_for(schedule_id, at))] = ("backfill", at)
            deadline = time.monotonic() + args.duration + 600
            # A sink in another process has no event to await: its count is polled.
            while time.monotonic() < deadline and await sink.unique(http) < len(planned):  # noqa: ASYNC110
                await asyncio.sleep(1.0)
            await fleet.stop()
    finally:
        await asyncio.to_thread(sink.stop)
    assert sink.out is not None
    report = analyse(sink.out, planned, made_at)
    report.update({"tenants": args.tenants, "schedules_per_tenant": args.schedules,
                   "replicas": args.replicas, "backfill_insert_seconds": round(insert_seconds, 3)})
    return report


def main() -> None:
    args = parse_args()
    out = args.out or Path(f"/tmp/cronwire-fairness-{os.getpid()}")
    out.mkdir(parents=True, exist_ok=True)
    if args.dsn:
        report = asyncio.run(main_async(args, args.dsn, out))
    else:
        with throwaway_cluster("cronwire-fairness-") as server:
            report = asyncio.run(main_async(args, server.dsn, out))
    (out / "report.json").write_text(json.dumps(report, indent=2))
    print(json.dumps(report))


if __name__ == "__main__":
    main()
