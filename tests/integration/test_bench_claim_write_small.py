"""The claim/write benchmark of ADR 0042 at a reduced size, so that its three shapes keep
running against the current schema and statements. Its figures are printed, not asserted
(CI machines are not benchmark machines); that each shape claimed and wrote every run
exactly once is checked by the script itself against the database's counts."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

from tests.support.processes import clean_env

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_claim_write.py"


@pytest.mark.benchmark
async def test_every_shape_claims_and_writes_each_run_once(database_url: str) -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(SCRIPT), "--runs", "600", "--batch", "64", "--prepare", "vacuum",
        "--dsn", database_url,
        env=clean_env(), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout=150)
    assert proc.returncode == 0, err.decode()[-2000:]
    rounds = [json.loads(line) for line in out.decode().splitlines()]
    print("bench_claim_write.py (reduced):", *rounds, sep="\n")
    assert [r["shape"] for r in rounds] == ["production", "status", "lease-table"]
    for r in rounds:
        # (WAL is not asserted: the suite's server may log little of it.)
        assert r["runs"] == 600 and r["runs_per_second"] > 0


@pytest.mark.benchmark
async def test_an_unknown_shape_is_refused_in_one_line(database_url: str) -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(SCRIPT), "--shapes", "status,nope", "--dsn", database_url,
        env=clean_env(), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout=60)
    assert proc.returncode == 2 and out == b""
    assert "--shapes: unknown ['nope']" in err.decode()
