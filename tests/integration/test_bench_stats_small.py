"""The stats benchmark at a reduced size: it must run in CI and be right (its latency is
printed, not asserted: CI machines are not benchmark machines)."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

from tests.support.processes import clean_env

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_stats.py"


@pytest.mark.benchmark
async def test_bench_stats_answers_match_sql(database_url: str) -> None:
    proc = await asyncio.create_subprocess_exec(
        # twice as many runs of other schedules, so that an index scan is the plan (as at
        # 100k; at 5,000 each a sequential scan of the partition is as cheap) -- main's sizing
        sys.executable, str(SCRIPT), "--runs", "40000", "--other-runs", "80000",
        "--samples", "20", "--dsn", database_url,
        env=clean_env(), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout=150)
    assert proc.returncode == 0, err.decode()[-2000:]
    lines = out.decode().strip().splitlines()
    assert len(lines) == 1
    report = json.loads(lines[0])
    print("bench_stats (reduced):", lines[0])
    # Every answer was compared with SQL counts (the script exits non-zero otherwise).
    assert report["runs_in_window"] == 40000 and report["samples"] == 20
    assert 0 < report["p50_ms"] <= report["p95_ms"] <= report["p99_ms"]
    assert report["index_only_scan"] and report["heap_fetches"] == 0
