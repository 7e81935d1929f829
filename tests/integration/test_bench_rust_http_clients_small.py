"""The Rust-HTTP-clients benchmark at a reduced size (docs/benchmarks.md#levers): it runs, measures the
lean deliverer against nginx, and reports a Rust client either measured or not installed
(they are not dependencies). Its figures are printed, not asserted."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

from cronwire.harness.nginx_sink import nginx_binary
from tests.support.processes import clean_env

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_rust_http_clients.py"


async def _run(*args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(SCRIPT), *args, env=clean_env(),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), timeout=120)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


@pytest.mark.benchmark
@pytest.mark.skipif(nginx_binary() is None, reason="nginx is not installed")
async def test_the_benchmark_measures_lean_and_reports_each_rust_client() -> None:
    code, out, err = await _run("--requests", "400", "--rounds", "1",
                                "--clients", "lean,pyreqwest-bare,pyreqwest")
    assert code == 0, err[-2000:]
    [line] = out.strip().splitlines()
    print("bench_rust_http_clients (reduced):", line)
    report = json.loads(line)
    lean = report["clients"]["lean"]
    assert len(lean["cpu_us_per_delivery"]) == 1 and lean["cpu_us_per_delivery"][0] > 0
    assert lean["deliveries_per_second"][0] > 0
    for name in ("pyreqwest-bare", "pyreqwest"):
        figures = report["clients"][name]
        assert figures == "not installed" or figures["cpu_us_per_delivery"][0] > 0


async def test_an_unknown_client_is_refused_with_one_line() -> None:
    code, _out, err = await _run("--clients", "lean,curl")
    assert code != 0
    assert err.strip().splitlines() == ["bench: unknown client 'curl'; one of "
                                        "lean, pyreqwest-bare, pyreqwest, rnet-bare, rnet, "
                                        "primp-bare, primp"]
