"""Planners as real processes on one database: exactly one run per occurrence, and a
planner killed with SIGKILL in the middle of its transaction loses nothing."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import pytest

from cronwire.adapters.metrics import PrometheusMetrics
from cronwire.adapters.postgres.planner_store import PostgresPlannerStore
from cronwire.loopback import free_port
from cronwire.service.planner import Planner
from tests.support.planner_data import (
    all_planned,
    create_tenant,
    insert_schedules,
    mismatches,
    runs_by_schedule,
    spread_workload,
    until,
)
from tests.support.processes import clean_env, cronwire_executable, wait_http_ok

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.chaos


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen[str]]]:
    """Processes a test starts; SIGKILLed at teardown if still alive (by their own pid)."""
    started: list[subprocess.Popen[str]] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=10)
        if proc.stdout is not None:
            proc.stdout.close()


def spawn(args: list[str], env: dict[str, str], log: Path | None = None) -> subprocess.Popen[str]:
    """Start a process; output goes to ``log`` (a file) or, without one, to a pipe."""
    if log is None:
        return subprocess.Popen(args, cwd=REPO, env=env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    with log.open("w") as out:  # the child keeps its own descriptor
        return subprocess.Popen(args, cwd=REPO, env=env, stdin=subprocess.DEVNULL,
                                stdout=out, stderr=subprocess.STDOUT, text=True)


@pytest.mark.slow
async def test_three_planner_processes_make_exactly_one_run_per_occurrence(
    database_url: str, db_pool: asyncpg.Pool, processes: list[subprocess.Popen[str]],
    tmp_path: Path,
) -> None:
    tenant = await create_tenant(db_pool)
    workload = [dataclasses.replace(s, status="paused")
                for s in spread_workload(await db_pool.fetchval("SELECT now()"), 2000)]
    specs = await insert_schedules(db_pool, tenant, workload)
    ports = [free_port() for _ in range(3)]
    for i, port in enumerate(ports):
        env = clean_env(
            SCHEDULER_DATABASE_URL=database_url, SCHEDULER_ROLES="planner",
            SCHEDULER_HTTP_PORT=str(port), SCHEDULER_INSTANCE_ID=f"planner-{i}",
            SCHEDULER_PLANNER_BATCH="40", SCHEDULER_DB_POOL_SIZE="2",
        )
        log = tmp_path / f"planner-{i}.log"
        processes.append(spawn([cronwire_executable(), "serve"], env, log))
    for port, proc in zip(ports, processes, strict=True):
        await asyncio.to_thread(wait_http_ok, f"http://127.0.0.1:{port}/readyz", 60, proc)

    # Everything becomes due at one instant, with all three replicas already ticking.
    await db_pool.execute("UPDATE schedule SET status = 'active'")
    await until(lambda: all_planned(db_pool), within=90)
    for proc in processes:
        proc.send_signal(signal.SIGTERM)
    for proc in processes:
        assert await asyncio.to_thread(proc.wait, 30) == 0

    found = await runs_by_schedule(db_pool)
    assert mismatches(specs, found) == []
    assert sum(len(v) for v in found.values()) == 2000 * 32
    for i in range(3):
        text = (tmp_path / f"planner-{i}.log").read_text()
        assert "Traceback" not in text and "planner tick failed" not in text, text[-2000:]


async def test_planner_killed_mid_transaction_loses_nothing(
    database_url: str, db_pool: asyncpg.Pool, processes: list[subprocess.Popen[str]]
) -> None:
    tenant = await create_tenant(db_pool)
    specs = await insert_schedules(
        db_pool, tenant, spread_workload(await db_pool.fetchval("SELECT now()"), 200)
    )
    holder = spawn([sys.executable, "-m", "tests.chaos.planner_holder", database_url, "100"],
                   clean_env())
    processes.append(holder)
    assert holder.stdout is not None
    line = await asyncio.wait_for(asyncio.to_thread(holder.stdout.readline), timeout=60)
    report = json.loads(line)
    held = set(report["claimed"])
    assert len(held) == 100 and report["inserted"] == 100 * 32
    # Inserted but not committed: invisible, and the schedules stay locked.
    assert await db_pool.fetchval("SELECT count(*) FROM job_run") == 0

    survivor = Planner(PostgresPlannerStore(db_pool), PrometheusMetrics(), batch=40,
                       tick_seconds=0.1, lookahead_seconds=5)
    stopping = asyncio.Event()
    task = asyncio.create_task(survivor.run(stopping))
    try:
        async def others_planned() -> bool:
            left = await db_pool.fetch(
                "SELECT id::text FROM schedule WHERE next_fire_at IS NOT NULL")
            return {r["id"] for r in left} == held

        # SKIP LOCKED: the survivor plans everything except what the stuck planner holds.
        await until(others_planned, within=30)
        assert await db_pool.fetchval("SELECT count(*) FROM job_run") == 100 * 32

        holder.send_signal(signal.SIGKILL)
        assert await asyncio.to_thread(holder.wait, 10) == -signal.SIGKILL
        # Postgres rolls the dead planner's transaction back and frees its locks.
        await until(lambda: all_planned(db_pool), within=30)
    finally:
        stopping.set()
        await asyncio.wait_for(task, timeout=5)
    assert mismatches(specs, await runs_by_schedule(db_pool)) == []
