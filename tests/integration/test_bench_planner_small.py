"""The planner benchmark at a reduced size: it must run in CI and be right (not fast)."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import asyncpg
import pytest

from tests.support.processes import clean_env

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_planner.py"


@pytest.mark.benchmark
async def test_bench_planner_materialises_every_run(
    database_url: str, db_pool: asyncpg.Pool
) -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(SCRIPT), "--schedules", "2000", "--dsn", database_url,
        "--planners", "2", "--batch", "300",
        env=clean_env(), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout=120)
    assert proc.returncode == 0, err.decode()[-2000:]
    lines = out.decode().strip().splitlines()
    assert len(lines) == 1
    report = json.loads(lines[0])
    assert report["schedules"] == report["runs"] == 2000
    assert report["seconds"] > 0 and report["runs_per_second"] > 0
    # The script checks itself; check again from outside: one pending run per schedule.
    rows = await db_pool.fetchrow(
        """SELECT count(*) AS runs, count(DISTINCT schedule_id) AS schedules,
                  count(DISTINCT scheduled_for) AS instants
           FROM job_run WHERE status = 'pending'"""
    )
    assert (rows["runs"], rows["schedules"], rows["instants"]) == (2000, 2000, 1)
    unplanned = await db_pool.fetchval(
        "SELECT count(*) FROM schedule WHERE next_fire_at <= now()")
    assert unplanned == 0
