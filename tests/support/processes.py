"""Running the `cronwire` console script as a real process in tests."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from cronwire.harness.fleet import HARNESS_SECRET_KEYS, UNLIMITED_API


def cronwire_executable() -> str:
    """The console script of this venv (falls back to ``python -m cronwire.cli``)."""
    candidate = Path(sys.executable).with_name("cronwire")
    if candidate.exists():
        return str(candidate)
    found = shutil.which("cronwire")
    if found is None:
        raise RuntimeError("cronwire console script not installed")
    return found


def clean_env(**overrides: str) -> dict[str, str]:
    """The test process environment without SCHEDULER_* or OTEL_* leaking in, with the
    per-tenant API rate and pending-runs limits out of the way (a test calls far faster
    than a tenant should; the tests of those limits pass their own), the tests' key ring
    (sealed secrets), plus overrides."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SCHEDULER_", "OTEL_"))}
    env.update(UNLIMITED_API)
    env["SCHEDULER_SECRET_KEYS"] = HARNESS_SECRET_KEYS
    env.update(overrides)
    return env


def run_cli(*args: str, env: dict[str, str], timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [cronwire_executable(), *args], env=env, capture_output=True, text=True, timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def wait_http_ok(url: str, deadline_seconds: float, proc: subprocess.Popen[str] | None = None) -> float:
    """Poll ``url`` until it answers 200; returns seconds waited. Fails on early exit."""
    start = time.monotonic()
    while time.monotonic() - start < deadline_seconds:
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"process exited early with {proc.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=1) as response:
                if response.status == 200:
                    return time.monotonic() - start
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.05)
    raise AssertionError(f"{url} not healthy within {deadline_seconds}s")


def stop_process(proc: subprocess.Popen[bytes] | subprocess.Popen[str], within: float = 30) -> int:
    """SIGTERM, then SIGKILL if it has not exited ``within`` seconds; the exit status."""
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout=within)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait()


def signal_and_wait(proc: subprocess.Popen[str], sig: int = signal.SIGINT, *,
                    within: float = 120, group: bool = False) -> tuple[int, str]:
    """Send ``sig`` (to the process group, as a terminal's Ctrl-C does, with ``group``),
    wait up to ``within`` seconds for the exit (an exit, not a timing: generous), kill it
    after that; (exit status, stderr). Every pipe is read to its end and closed."""
    try:
        if group:
            os.killpg(proc.pid, sig)
        else:
            proc.send_signal(sig)
        _, err = proc.communicate(timeout=within)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
    return proc.returncode, err or ""
