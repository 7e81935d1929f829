"""The executor benchmark at a reduced size: it must run in CI and be right (not fast)."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import asyncpg
import pytest

from tests.support.processes import clean_env

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_executor.py"


@pytest.mark.benchmark
async def test_bench_executor_delivers_every_run_once(
    database_url: str, db_pool: asyncpg.Pool
) -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(SCRIPT), "--runs", "2000", "--dsn", database_url,
        "--workers", "64", "--batch", "100", "--tenants", "2",
        env=clean_env(), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout=150)
    assert proc.returncode == 0, err.decode()[-2000:]
    lines = out.decode().strip().splitlines()
    assert len(lines) == 1
    result = json.loads(lines[0])
    assert result["runs"] == 2000
    assert result["delivered"] == 2000 and result["duplicates"] == 0
    assert result["non_terminal"] == 0 and result["runs_per_second"] > 0
    counts = dict(await db_pool.fetch("SELECT status, count(*) FROM job_run GROUP BY status"))
    assert counts == {"succeeded": 2000}
    evidence = await db_pool.fetchval(
        "SELECT count(*) FROM run_attempt WHERE outcome = 'success' AND attempt = 1")
    assert evidence == 2000
