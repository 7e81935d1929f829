"""How long Postgres takes to plan and to run the claim, main's statement against today's.

The overlap gate made ``job_run_claim`` a larger statement; under ``allow`` what it still
costs is mostly planning (ADR 0033, "Measured"). This seeds ``--schedules`` schedules with
``--per-schedule`` due runs each, then runs ``EXPLAIN (ANALYZE, SUMMARY)`` of both claims,
alternating, each in a rolled-back transaction, and prints one JSON line with the median
planning and execution milliseconds of each.

    python benchmarks/bench_claim_planning.py --old-sql OLD_job_run.sql [--rounds 15]

The old file comes from git: ``git show main:src/cronwire/adapters/postgres/queries/
job_run.sql > /tmp/old_job_run.sql`` (main before the overlap policies were merged into it).
Since migration 0029 today's claim hands its candidates to ``cronwire_claim_tail``, whose
statement is planned inside the function: EXPLAIN's planning time no longer includes it
(its execution time does). Today's claim takes its clock last (NULL: the server's).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
from pathlib import Path

from cronwire.adapters.embedded.postgres import throwaway_cluster
from cronwire.adapters.postgres.migrator import migrate
from cronwire.adapters.postgres.pool import create_pool
from cronwire.adapters.postgres.sql import parse_queries, queries
from cronwire.harness.seeding import seed_due_runs, seed_schedule, seed_tenant

CLOCK: dict[str, tuple[None, ...]] = {"old": (), "new": (None,)}  # today's `now`: NULL


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--old-sql", type=Path, required=True, help="the old job_run.sql")
    parser.add_argument("--schedules", type=int, default=200)
    parser.add_argument("--per-schedule", type=int, default=100)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=15)
    return parser.parse_args(argv)


async def run(args: argparse.Namespace, dsn: str) -> dict[str, object]:
    await migrate(dsn)
    statements = {"old": parse_queries(args.old_sql.read_text())["job_run_claim"],
                  "new": queries()["job_run_claim"]}
    timings: dict[str, list[tuple[float, float]]] = {name: [] for name in statements}
    pool = await create_pool(dsn, 2)
    try:
        async with pool.acquire() as conn:
            tenant = await seed_tenant(conn)
            for n in range(args.schedules):
                schedule = await seed_schedule(conn, tenant, "http://127.0.0.1:9/")
                await seed_due_runs(conn, schedule, args.per_schedule,
                                    first=n * args.per_schedule)
            await conn.execute("ANALYZE")
            for round_ in range(args.rounds):
                order = ["old", "new"] if round_ % 2 == 0 else ["new", "old"]
                for name in order:
                    tx = conn.transaction()  # rolled back: every round sees the same rows
                    await tx.start()
                    try:
                        raw = await conn.fetchval(
                            "EXPLAIN (ANALYZE, SUMMARY, FORMAT JSON) " + statements[name],
                            "bench", args.batch, 30.0, 0.0, *CLOCK[name])
                    finally:
                        await tx.rollback()
                    plan = (json.loads(raw) if isinstance(raw, str) else raw)[0]
                    timings[name].append((plan["Planning Time"], plan["Execution Time"]))
    finally:
        await pool.close()
    return {f"{name}_{part}_median_ms": round(statistics.median(t[i] for t in values), 2)
            for name, values in timings.items()
            for i, part in enumerate(("planning", "execution"))} | {
        "rounds": args.rounds, "batch": args.batch,
        "runs": args.schedules * args.per_schedule}


def main() -> None:
    args = parse_args()
    with throwaway_cluster("cronwire-claim-plan-") as server:
        print(json.dumps(asyncio.run(run(args, server.dsn))))


if __name__ == "__main__":
    main()
