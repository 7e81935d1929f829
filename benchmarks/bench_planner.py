"""Planner throughput: N schedules all due at the same instant (the seed ADR's worst case,
100k schedules on one cron), timed from the instant they become due until every run row
exists. Prints one JSON line: {"schedules", "runs", "seconds", "runs_per_second", ...}.

    python benchmarks/bench_planner.py [--schedules 100000] [--dsn postgresql://...]
                                       [--planners 1] [--batch 500] [--concurrency 2]
                                       [--shape burst]

``--shape burst`` (the default) is the load test's burst: cron "* * * * * *" with
``ends_at`` at the instant, so each schedule gets one run and then no further occurrence.
``--shape daily`` fires each schedule daily at that second (its cursor moves a day on).

Without --dsn an embedded Postgres with durable settings (fsync on) runs in a temp dir.
The planners are the production Planner loops (``--planners 2``: as two replicas would run
them), each with a pool of ``--concurrency`` connections (its transactions in flight). The
defaults are a replica's defaults: one planner, batch 500, PIPELINE_DEPTH transactions.
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

import asyncpg

from cronwire.adapters.embedded.postgres import throwaway_cluster
from cronwire.adapters.metrics import PrometheusMetrics
from cronwire.adapters.postgres.migrator import migrate
from cronwire.adapters.postgres.planner_store import PostgresPlannerStore
from cronwire.adapters.postgres.pool import create_pool
from cronwire.service.planner import PIPELINE_DEPTH, Planner

LOOKAHEAD_SECONDS = 5.0
INSERT_SCHEDULES = """
INSERT INTO schedule (id, tenant_id, name, cron, timezone, target, retry, next_fire_at,
                      ends_at, signing_secret)
SELECT id, $1, 'bench', $2, 'UTC', '{"url": "http://127.0.0.1:9/hook"}'::jsonb, '{}'::jsonb,
       $3, $4, 'whsec_bench'
FROM unnest($5::uuid[]) AS id
"""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--schedules", type=int, default=100_000)
    parser.add_argument("--dsn", help="an existing database (default: embedded Postgres)")
    parser.add_argument("--planners", type=int, default=1, help="planner loops (replicas)")
    parser.add_argument("--batch", type=int, default=500, help="schedules per transaction")
    parser.add_argument("--concurrency", type=int, default=PIPELINE_DEPTH,
                        help="transactions in flight per planner")
    parser.add_argument("--shape", choices=("burst", "daily"), default="burst",
                        help="burst: every second, ends at the instant; daily: at that second")
    return parser.parse_args(argv)


async def seed(pool: asyncpg.Pool, count: int, shape: str) -> datetime:
    """One tenant and ``count`` schedules whose one occurrence today is the same instant,
    far enough ahead that none is due before the clock starts. Returns that instant."""
    now: datetime = await pool.fetchval("SELECT now()")
    lead = LOOKAHEAD_SECONDS + 2 + count / 40_000
    fire_at = (now + timedelta(seconds=lead)).replace(microsecond=0)
    if shape == "burst":
        cron, ends_at = "* * * * * *", fire_at
    else:
        cron, ends_at = f"{fire_at.second} {fire_at.minute} {fire_at.hour} * * *", None
    tenant = uuid.uuid4()
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute("INSERT INTO tenant (id, name) VALUES ($1, 'bench')", tenant)
        await conn.execute(INSERT_SCHEDULES, tenant, cron, fire_at, ends_at,
                           [uuid.uuid4() for _ in range(count)])
    await pool.execute("ANALYZE schedule")
    return fire_at


async def wait_until_due(pool: asyncpg.Pool, fire_at: datetime) -> None:
    due = fire_at - timedelta(seconds=LOOKAHEAD_SECONDS)
    while True:
        now: datetime = await pool.fetchval("SELECT now()")
        if now >= due:
            return
        await asyncio.sleep(min(0.5, (due - now).total_seconds()))


async def plan_all(dsn: str, expected: int, planners: int, batch: int,
                   concurrency: int = PIPELINE_DEPTH) -> float:
    """Run ``planners`` Planner loops until they inserted ``expected`` runs; seconds taken.

    Wall time depends on what else the machine runs; ``main`` also reports CPU seconds."""
    pools = [await create_pool(dsn, concurrency) for _ in range(planners)]
    loops = [Planner(PostgresPlannerStore(pool), PrometheusMetrics(), batch=batch,
                     tick_seconds=1.0, lookahead_seconds=LOOKAHEAD_SECONDS,
                     concurrency=concurrency) for pool in pools]
    stopping = asyncio.Event()
    started = time.perf_counter()
    tasks = [asyncio.create_task(loop.run(stopping)) for loop in loops]
    try:
        while sum(loop.runs_inserted for loop in loops) < expected:
            ticks = [asyncio.ensure_future(loop.next_tick()) for loop in loops]
            done, pending = await asyncio.wait(ticks, timeout=60,
                                               return_when=asyncio.FIRST_COMPLETED)
            for waiter in pending:
                waiter.cancel()
            if not done:
                raise RuntimeError("planners made no progress for 60 s")
        return time.perf_counter() - started
    finally:
        stopping.set()
        await asyncio.gather(*tasks)
        for pool in pools:
            await pool.close()


def cluster_cpu_seconds(postmaster_pid: int | None) -> float:
    """CPU seconds used so far by a local Postgres cluster (postmaster and its children)."""
    if postmaster_pid is None:
        return 0.0
    ticks = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            # Fields after the ")" that closes the command name: state ppid ... utime stime.
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # the process ended while we looked
        if stat.parent.name == str(postmaster_pid):
            # Its own time plus that of children already gone (backends of closed pools).
            ticks += sum(int(f) for f in fields[11:15])
        elif int(fields[1]) == postmaster_pid:
            ticks += int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


async def bench(
    dsn: str, args: argparse.Namespace, postmaster_pid: int | None = None
) -> dict[str, object]:
    await migrate(dsn)
    pool = await create_pool(dsn, 2)
    try:
        fire_at = await seed(pool, args.schedules, args.shape)
        await wait_until_due(pool, fire_at)
        cpu_before = time.process_time(), cluster_cpu_seconds(postmaster_pid)
        seconds = await plan_all(dsn, args.schedules, args.planners, args.batch,
                                 args.concurrency)
        cpu_planner = time.process_time() - cpu_before[0]
        cpu_postgres = cluster_cpu_seconds(postmaster_pid) - cpu_before[1]
        runs = await pool.fetchval(
            "SELECT count(*) FROM job_run WHERE scheduled_for = $1 AND status = 'pending'",
            fire_at,
        )
        advanced = await pool.fetchval(
            "SELECT count(*) FROM schedule WHERE next_fire_at IS NOT DISTINCT FROM $1",
            None if args.shape == "burst" else fire_at + timedelta(days=1),
        )
    finally:
        await pool.close()
    if runs != args.schedules or advanced != args.schedules:
        raise SystemExit(f"bench: expected {args.schedules} runs and advances, "
                         f"found {runs} runs, {advanced} advances")
    return {
        "schedules": args.schedules,
        "runs": runs,
        "seconds": round(seconds, 3),
        "runs_per_second": round(runs / seconds),
        "planners": args.planners,
        "batch": args.batch,
        "concurrency": args.concurrency,
        "shape": args.shape,
        # Load-independent cost: CPU seconds spent while planning (Postgres only when the
        # cluster is the embedded one, whose processes we can see).
        "cpu_seconds_planner": round(cpu_planner, 3),
        "cpu_seconds_postgres": round(cpu_postgres, 3) if postmaster_pid else None,
    }


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.dsn:
        result = asyncio.run(bench(args.dsn, args))
    else:
        with throwaway_cluster("cronwire-bench-") as server:
            pid = int((server.data_dir / "postmaster.pid").read_text().split()[0])
            result = asyncio.run(bench(server.dsn, args, pid))
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
