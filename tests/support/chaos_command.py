"""Running `cronwire chaos` as a user does, for the chaos suites: reduced sizes in CI,
the full size with CRONWIRE_CHAOS_FULL=1."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

FULL = os.environ.get("CRONWIRE_CHAOS_FULL") == "1"


def chaos_size() -> list[str]:
    if FULL:
        return ["--schedules", "300", "--duration", "30", "--burst", "50000"]
    return ["--schedules", "20", "--duration", "8", "--burst", "3000"]


def run_chaos(out: Path, mode: str, faults: str) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    """Three replicas; the command's output and its report.json."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCHEDULER_")}
    env.setdefault("XDG_RUNTIME_DIR", "/tmp")
    done = subprocess.run(
        [sys.executable, "-m", "cronwire.cli", "chaos", "--mode", mode, "--faults", faults,
         "--replicas", "3", "--out", str(out), *chaos_size()],
        env=env, capture_output=True, text=True, timeout=3000 if FULL else 600,
    )
    report_file = out / "report.json"
    assert report_file.exists(), done.stderr[-3000:]
    return done, json.loads(report_file.read_text())
