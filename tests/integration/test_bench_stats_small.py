"""The stats benchmark at a reduced size: it must run in CI and be right (its latency is
printed, not asserted: CI machines are not benchmark machines). Its answers' counts and
percentiles are checked against SQL by the script itself."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.processes import clean_env

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


async def _report(script: str, *args: str) -> dict[str, Any]:
    """Runs a benchmark script; its one line of JSON."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(BENCHMARKS / script), *args,
        env=clean_env(), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout=150)
    assert proc.returncode == 0, err.decode()[-2000:]
    lines = out.decode().strip().splitlines()
    assert len(lines) == 1
    print(f"{script} (reduced):", lines[0])
    report: dict[str, Any] = json.loads(lines[0])
    return report


@pytest.mark.benchmark
async def test_bench_stats_answers_match_sql(database_url: str) -> None:
    # 40,000 runs over 29.9 days: above KEEP_MIN_RUNS a day, so closed days are kept;
    # twice as many of other schedules, so that an index scan is the plan (as at 100k)
    report = await _report("bench_stats.py", "--runs", "40000", "--other-runs", "80000",
                           "--samples", "20", "--dsn", database_url)
    # Every answer was compared with SQL counts (the script exits non-zero otherwise).
    assert report["runs_in_window"] == 40000 and report["samples"] == 20
    assert 0 < report["p50_ms"] <= report["p95_ms"] <= report["p99_ms"]
    assert report["first_ms"] > 0 and report["kept_periods"] >= 28
    # VACUUM covered every page (an overlapping autoanalyze's snapshot once left some out,
    # and the plan became a sequential scan), and the plan is the index-only scan.
    assert report["partitions_not_all_visible"] == 0
    assert report["index_only_scan"] and report["heap_fetches"] == 0, report["plan_scans"]


@pytest.mark.benchmark
async def test_bench_stats_shapes_times_every_shape(database_url: str) -> None:
    """The query-shape comparison behind ADR 0036 still runs: every shape is valid SQL
    against the current schema and is timed."""
    report = await _report("bench_stats_shapes.py", "--runs", "2000", "--other-runs",
                           "2000", "--rounds", "3", "--dsn", database_url)
    shapes = {"counts_only", "counts_lag_expr", "sorts", "day_values",
              "hash_histogram_int", "hash_histogram_log"}
    assert shapes <= report.keys() and report["rounds"] == 3
    for name in shapes:
        assert 0 < report[name]["min_ms"] <= report[name]["median_ms"] <= report[name]["p95_ms"]
