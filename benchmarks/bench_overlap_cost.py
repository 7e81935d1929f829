"""What the overlap gate costs the claim and the planner when every schedule is on `allow`:
the statements before the overlap policies against today's, on one database, interleaved.

A 100k-run burst is seeded (``--schedules`` schedules of one tenant with ``--runs`` due runs
between them). Each round runs, in alternating order, the old and the new
``job_run_claim`` (a claim of ``--batch`` runs), then the old and the new planner writes
(``job_run_insert_planned`` + ``schedule_advance`` for ``--batch`` schedules), each in a
transaction that is rolled back, so every statement sees the same rows. Each is timed by
wall clock and by the CPU its Postgres backend used (from /proc: on a shared machine the
wall clock mostly measures the neighbours). Prints one JSON line with the median and mean
milliseconds per statement and the new/old ratios; with ``--gated`` it also times the new
claim with every run under ``skip`` (the gate's own cost); with ``--keys N`` it then
gives the schedules flow control over N keys (limits no claim reaches: every run is
admitted) and times the new claim again (flow control's cost on many keys).

    python benchmarks/bench_overlap_cost.py --old-sql OLD_job_run.sql --old-schedule-sql \\
        OLD_schedule.sql [--rounds 40] [--repeat 10] [--batch 500] [--gated] [--keys N]

The old files come from git: ``git show 7ec46d0:src/cronwire/adapters/postgres/queries/
job_run.sql > /tmp/old_job_run.sql`` (and schedule.sql likewise).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import time
import uuid
from datetime import timedelta
from pathlib import Path

import asyncpg

from cronwire.adapters.embedded.postgres import throwaway_cluster
from cronwire.adapters.postgres.migrator import migrate
from cronwire.adapters.postgres.pool import create_pool
from cronwire.adapters.postgres.sql import parse_queries, queries
from cronwire.domain.model import IDEMPOTENCY_KEY_PREFIX, run_id_hexes
from cronwire.harness.seeding import (
    seed_due_runs,
    seed_flow_control,
    seed_schedule,
    seed_tenant,
)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--old-sql", type=Path, required=True, help="the old job_run.sql")
    parser.add_argument("--old-schedule-sql", type=Path, required=True,
                        help="the old schedule.sql")
    parser.add_argument("--schedules", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--repeat", type=int, default=10,
                        help="transactions per timed block (the CPU clock ticks every 10 ms)")
    parser.add_argument("--plan-cache-mode",
                        choices=["auto", "force_generic_plan", "force_custom_plan"],
                        help="set on the connection (default: the server's, auto)")
    parser.add_argument("--keys", type=int, default=0,
                        help="also time the new claim with the schedules spread over N "
                             "flow-control keys (max_concurrency 1,000,000 each)")
    parser.add_argument("--gated", action="store_true",
                        help="also time the new claim with every run under overlap 'skip'")
    parser.add_argument("--dsn", help="an existing, empty database (default: embedded)")
    return parser.parse_args(argv)


TICK_MS = 1000 / os.sysconf("SC_CLK_TCK")


def backend_cpu_ms(pid: int) -> float:
    """utime + stime of a Postgres backend, in milliseconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * TICK_MS


async def timed(conn: asyncpg.Connection, pid: int, work: list[tuple[str, list[object]]],
                repeat: int) -> tuple[float, float]:
    """(wall ms, backend CPU ms) per transaction of the statements, each rolled back."""
    cpu = backend_cpu_ms(pid)
    began = time.perf_counter()
    for _ in range(repeat):
        tx = conn.transaction()
        await tx.start()
        try:
            for sql, args in work:
                await conn.execute(sql, *args)
        finally:
            await tx.rollback()
    wall = (time.perf_counter() - began) * 1000 / repeat
    return wall, (backend_cpu_ms(pid) - cpu) / repeat


def planner_work(schedules: list[uuid.UUID], tenant: uuid.UUID, at: object,
                 insert: str, advance: str, new: bool) -> list[tuple[str, list[object]]]:
    ids = run_id_hexes((sid, at) for sid in schedules)  # type: ignore[misc]
    insert_args: list[object] = [ids, [tenant] * len(ids), schedules, [at] * len(ids),
                                 [IDEMPOTENCY_KEY_PREFIX + i for i in ids],
                                 ["schedule"] * len(ids), ["pending"] * len(ids)]
    advance_args: list[object] = [schedules, [None] * len(ids), [at] * len(ids)]
    # The statements' own parameters decide (an "old" ref may be the first overlap build or later):
    # 'allow' and no jitter are NULL arrays, as are flow keys (migration 0012); the advance
    # counts what it planned.
    if new or "$9::" in insert:
        insert_args += [None, None]
    if "$10::" in insert:
        insert_args.append(None)
    if new or "$5::" in advance:
        advance_args += [[1] * len(ids), None]
    return [(insert, insert_args), (advance, advance_args)]


async def run(args: argparse.Namespace, dsn: str) -> dict[str, object]:
    await migrate(dsn)
    old = parse_queries(args.old_sql.read_text())
    old_schedule = parse_queries(args.old_schedule_sql.read_text())
    new = queries()
    pool = await create_pool(dsn, 2)
    try:
        async with pool.acquire() as conn:
            tenant = await seed_tenant(conn)
            seeded = []
            schedules = []
            per = args.runs // args.schedules
            for n in range(args.schedules):
                schedule = await seed_schedule(conn, tenant, "http://127.0.0.1:9/")
                await seed_due_runs(conn, schedule, per, first=n * per)
                seeded.append(schedule.id)
                schedules.append(schedule)
            await conn.execute("ANALYZE")
            at = (await conn.fetchval("SELECT date_trunc('second', now())")) + timedelta(hours=1)
            claim = [args.batch, 30.0, 0.0]
            cases = {
                "claim_old": [(old["job_run_claim"], ["bench", *claim])],
                # today's claim takes its clock last: NULL, the server's
                "claim_new": [(new["job_run_claim"], ["bench", *claim, None])],
                "plan_old": planner_work(seeded[:args.batch], tenant, at,
                                         old["job_run_insert_planned"],
                                         old_schedule["schedule_advance"], new=False),
                "plan_new": planner_work(seeded[:args.batch], tenant, at,
                                         new["job_run_insert_planned"],
                                         new["schedule_advance"], new=True),
            }
            pid = await conn.fetchval("SELECT pg_backend_pid()")
            if args.plan_cache_mode:
                await conn.execute(f"SET plan_cache_mode = {args.plan_cache_mode}")
            walls: dict[str, list[float]] = {name: [] for name in cases}
            cpus: dict[str, list[float]] = {name: [] for name in cases}
            names = list(cases)
            for round_ in range(args.rounds):
                order = names if round_ % 2 == 0 else names[::-1]
                for name in order:
                    wall, cpu = await timed(conn, pid, cases[name], args.repeat)
                    walls[name].append(wall)
                    cpus[name].append(cpu)
            if args.keys:
                for n, schedule in enumerate(schedules):
                    await seed_flow_control(conn, schedule, f"key-{n % args.keys}",
                                            max_concurrency=1_000_000)
                await conn.execute("ANALYZE")
                keyed = [await timed(conn, pid, cases["claim_new"], args.repeat)
                         for _ in range(max(1, args.rounds // 2))]
                walls[f"claim_new_{args.keys}_keys"] = [w for w, _ in keyed]
                cpus[f"claim_new_{args.keys}_keys"] = [c for _, c in keyed]
            if args.gated:
                await conn.execute("UPDATE schedule SET overlap_policy = 'skip'")
                await conn.execute("UPDATE job_run SET overlap_policy = 'skip'")
                await conn.execute("ANALYZE")
                gated = [await timed(conn, pid, cases["claim_new"], args.repeat)
                         for _ in range(max(1, args.rounds // 4))]
                walls["claim_new_all_gated"] = [w for w, _ in gated]
                cpus["claim_new_all_gated"] = [c for _, c in gated]
    finally:
        await pool.close()

    report: dict[str, object] = {
        name: {"wall_median_ms": round(statistics.median(walls[name]), 3),
               "cpu_mean_ms": round(statistics.fmean(cpus[name]), 3)}
        for name in walls}
    for stage in ("claim", "plan"):
        report[f"{stage}_new_over_old_cpu"] = round(
            statistics.fmean(cpus[f"{stage}_new"]) / statistics.fmean(cpus[f"{stage}_old"]), 3)
        report[f"{stage}_new_over_old_wall"] = round(
            statistics.median(walls[f"{stage}_new"]) / statistics.median(walls[f"{stage}_old"]), 3)
    report.update({"rounds": args.rounds, "repeat": args.repeat, "batch": args.batch,
                   "runs": args.runs, "schedules": args.schedules})
    return report


def main() -> None:
    args = parse_args()
    if args.dsn:
        report = asyncio.run(run(args, args.dsn))
    else:
        with throwaway_cluster("cronwire-overlap-") as server:
            report = asyncio.run(run(args, server.dsn))
    print(json.dumps(report))


if __name__ == "__main__":
    main()
