"""Executor throughput: N due runs -> signed POSTs to a local sink -> terminal rows written.

One replica's production Executor (lean deliverer by default, Postgres claim source, run store and
breaker store) runs in this process; the sink is a separate process so the two do not
share a core. Timed from the executor's start, with every run already due, until the last
terminal write has landed; then checked against the database and the sink. Prints one
JSON line: {"runs", "seconds", "runs_per_second", "delivered", "duplicates", ...}.

    python benchmarks/bench_executor.py [--runs 20000] [--dsn postgresql://...]
                                        [--workers 256] [--batch 500]

Without --dsn an embedded Postgres with durable settings (fsync on) runs in a temp dir.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path

import aiohttp

ROOT = Path(__file__).resolve().parents[1]

from cronwire.adapters.clock import SystemClock  # noqa: E402
from cronwire.adapters.embedded.postgres import throwaway_cluster  # noqa: E402
from cronwire.adapters.http.guard import TargetGuard  # noqa: E402
from cronwire.adapters.http.httpx_deliverer import HttpxDeliverer  # noqa: E402
from cronwire.adapters.http.lean_deliverer import LeanDeliverer  # noqa: E402
from cronwire.adapters.metrics import PrometheusMetrics  # noqa: E402
from cronwire.adapters.postgres.breaker_store import PostgresBreakerStore  # noqa: E402
from cronwire.adapters.postgres.claim_source import PostgresClaimSource  # noqa: E402
from cronwire.adapters.postgres.migrator import migrate  # noqa: E402
from cronwire.adapters.postgres.pool import create_pool  # noqa: E402
from cronwire.adapters.postgres.run_store import PostgresRunStore  # noqa: E402
from cronwire.bootstrap.executor import build_executor  # noqa: E402
from cronwire.bootstrap.factories import secret_box as harness_box  # noqa: E402
from cronwire.bootstrap.replica import tune_gc  # noqa: E402
from cronwire.harness.fleet import HARNESS_SECRET_KEYS  # noqa: E402
from cronwire.harness.seeding import non_terminal, seed_due_runs, seed_schedule, seed_tenant  # noqa: E402
from cronwire.service.executor import ExecutorSettings  # noqa: E402


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20_000)
    parser.add_argument("--dsn", help="an existing, migrated-or-empty database (default: embedded)")
    parser.add_argument("--workers", type=int, default=256, help="SCHEDULER_EXECUTOR_WORKERS")
    parser.add_argument("--batch", type=int, default=500, help="SCHEDULER_EXECUTOR_BATCH")
    parser.add_argument("--tenants", type=int, default=1)
    parser.add_argument("--deliverer", choices=["httpx", "lean"], default="lean",
                        help="SCHEDULER_DELIVERER")
    parser.add_argument("--timeout", type=float, default=600, help="give up after (seconds)")
    return parser.parse_args(argv)


def start_sink() -> tuple[subprocess.Popen[str], int]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "cronwire.harness.sink_process", "--port", "0"], cwd=ROOT,
        stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
    )
    assert proc.stdout is not None
    port = int(json.loads(proc.stdout.readline())["port"])
    return proc, port


async def sink_stats(port: int) -> dict[str, int]:
    async with aiohttp.ClientSession() as session, session.get(
        f"http://127.0.0.1:{port}/_stats"
    ) as response:
        stats: dict[str, int] = await response.json()
        return stats


async def finished(metrics: PrometheusMetrics, total: int, deadline: float) -> None:
    """Wait until ``total`` runs reached a terminal state (checked every 10 ms)."""
    while True:
        done = sum(
            metrics.registry.get_sample_value("scheduler_runs_total", {"outcome": outcome}) or 0
            for outcome in ("succeeded", "failed")
        )
        if done >= total:
            return
        if time.perf_counter() > deadline:
            raise TimeoutError(f"only {done:.0f} of {total} runs finished")
        await asyncio.sleep(0.01)


async def run(args: argparse.Namespace, dsn: str, sink_port: int) -> dict[str, object]:
    await migrate(dsn)
    pool = await create_pool(dsn, 8)
    kind = LeanDeliverer if args.deliverer == "lean" else HttpxDeliverer
    deliverer = kind(TargetGuard(allow_private=True), max_connections=args.workers)
    await deliverer.start()
    try:
        async with pool.acquire() as conn:
            for n in range(args.tenants):
                schedule = await seed_schedule(
                    conn, await seed_tenant(conn, f"bench-{n}"),
                    f"http://127.0.0.1:{sink_port}/hook",
                )
                await seed_due_runs(conn, schedule, args.runs // args.tenants)
            await conn.execute("ANALYZE job_run")
        total = args.runs // args.tenants * args.tenants
        metrics = PrometheusMetrics()
        lease = 20.0
        # Configured as `cronwire serve` would be: no test signals (they keep a record of
        # every run), progress read from the replica's own scheduler_runs_total.
        executor = build_executor(
            ExecutorSettings(owner="bench", workers=args.workers, batch=args.batch,
                             lease_seconds=lease, delivery_timeout=lease / 2, grace_seconds=10),
            claims=PostgresClaimSource(pool, harness_box(pool, HARNESS_SECRET_KEYS)),
            runs=PostgresRunStore(pool), breakers=PostgresBreakerStore(pool),
            deliverer=deliverer, metrics=metrics, clock=SystemClock(),
        )
        tune_gc()  # as `cronwire serve` does
        stopping = asyncio.Event()
        began = time.perf_counter()
        cpu_began = time.process_time()
        task = asyncio.create_task(executor.run(stopping))
        await finished(metrics, total, began + args.timeout)
        seconds = time.perf_counter() - began
        # CPU per run is what the executor's own code costs; on a shared machine it is
        # far steadier than runs/s, which also measures everyone else's load.
        cpu_seconds = time.process_time() - cpu_began
        stopping.set()
        await task
        stats = await sink_stats(sink_port)
        left = await non_terminal(pool)  # type: ignore[arg-type]
        return {
            "benchmark": "executor",
            "runs": total,
            "seconds": round(seconds, 3),
            "runs_per_second": round(total / seconds, 1),
            "cpu_us_per_run": round(cpu_seconds / total * 1e6, 1),
            "delivered": stats["unique"],
            "duplicates": stats["duplicates"],
            "non_terminal": left,
            "workers": args.workers,
            "batch": args.batch,
            "tenants": args.tenants,
            "deliverer": args.deliverer,
        }
    finally:
        await deliverer.close()
        await pool.close()


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    sink, port = start_sink()
    try:
        if args.dsn:
            result = _run(run(args, args.dsn, port))
        else:
            with throwaway_cluster("cronwire-bench-") as server:
                result = _run(run(args, server.dsn, port))
    finally:
        sink.terminate()
        sink.wait(10)
    print(json.dumps(result))


def _run(coro: object) -> dict[str, object]:
    import uvloop

    return uvloop.run(coro)  # type: ignore[arg-type, no-any-return]


if __name__ == "__main__":
    main()
