"""Cost of the planner's partition-bounds read (ADR 0010): mean round trip of
``job_run_partition_bounds`` against ``SELECT 1`` on one connection, after a warm-up.

    python benchmarks/bench_partition_bounds.py [--calls 1000]

An embedded Postgres (durable settings) with the migrated schema runs in a temp dir.
Prints one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time

import asyncpg

from cronwire.adapters.embedded.postgres import throwaway_cluster
from cronwire.adapters.postgres.migrator import migrate
from cronwire.adapters.postgres.pool import create_pool
from cronwire.adapters.postgres.sql import queries


async def _mean_ms(conn: asyncpg.Connection, sql: str, calls: int) -> float:
    for _ in range(50):
        await conn.fetch(sql)
    started = time.perf_counter()
    for _ in range(calls):
        await conn.fetch(sql)
    return (time.perf_counter() - started) / calls * 1000


async def measure(dsn: str, calls: int) -> dict[str, object]:
    await migrate(dsn)
    pool = await create_pool(dsn, 1)
    try:
        async with pool.acquire() as conn:
            bounds = queries()["job_run_partition_bounds"]
            partitions = len(await conn.fetch(bounds))
            return {"partitions": partitions, "calls": calls,
                    "bounds_ms": round(await _mean_ms(conn, bounds, calls), 3),
                    "select_1_ms": round(await _mean_ms(conn, "SELECT 1", calls), 3)}
    finally:
        await pool.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1000)
    args = parser.parse_args()
    with throwaway_cluster() as server:
        print(json.dumps(asyncio.run(measure(server.dsn, args.calls))))


if __name__ == "__main__":
    main()
