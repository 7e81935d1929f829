"""`cronwire loadtest` end to end: its own Postgres, sink and replica processes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.processes import clean_env, run_cli

CONTRACT_KEYS = {
    "mode", "schedules", "replicas", "planned", "delivered", "duplicates", "lost",
    "runs_per_second", "fire_lag_p50_ms", "fire_lag_p95_ms", "fire_lag_p99_ms",
    "drain_seconds",
}


@pytest.mark.slow
def test_small_load_test_reports_every_fire_delivered_once(tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = run_cli(
        "loadtest", "--mode", "postgres", "--schedules", "50", "--replicas", "2",
        "--duration", "4", "--cron", "*/2 * * * * *", "--out", str(out),
        env=clean_env(MPLCONFIGDIR=str(tmp_path / "mpl")), timeout=170,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert set(report) == CONTRACT_KEYS
    assert report["planned"] == 50 * 3  # occurrences at +0, +2 and +4 s
    assert (report["delivered"], report["duplicates"], report["lost"]) == (150, 0, 0)
    assert json.loads((out / "report.json").read_text()) == report
    assert (out / "report.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
