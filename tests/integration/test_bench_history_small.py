"""The run-history benchmark at a reduced size: it must run in CI and be right (the
latency it reports is printed, not asserted: CI machines are not benchmark machines)."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import asyncpg
import pytest

from tests.support.processes import clean_env

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_history.py"


@pytest.mark.benchmark
async def test_bench_history_pages_match_sql(database_url: str, db_pool: asyncpg.Pool) -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(SCRIPT), "--runs", "50000", "--schedules", "100", "--tenants", "5",
        "--samples", "100", "--dsn", database_url,
        env=clean_env(), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout=150)
    assert proc.returncode == 0, err.decode()[-2000:]
    lines = out.decode().strip().splitlines()
    assert len(lines) == 1
    report = json.loads(lines[0])
    print("bench_history (reduced):", lines[0])
    assert (report["runs"], report["schedules"], report["partitions"]) == (50_000, 100, 3)
    # The script compared every tenth timed page with SQL and exits non-zero on a mismatch.
    assert report["pages_checked_against_sql"] == 2 * 10
    for kind in ("schedule_page", "window"):
        assert 0 < report[f"{kind}_p50_ms"] <= report[f"{kind}_p95_ms"] <= report[f"{kind}_p99_ms"]
    # From outside: three monthly partitions hold the runs, 500 per schedule.
    per_partition = await db_pool.fetch(
        "SELECT tableoid::regclass::text AS part, count(*) AS n FROM job_run GROUP BY 1")
    assert len(per_partition) == 3 and sum(r["n"] for r in per_partition) == 50_000
    assert await db_pool.fetchval(
        "SELECT count(*) FROM (SELECT schedule_id FROM job_run GROUP BY 1 "
        "HAVING count(*) = 500) AS s") == 100
