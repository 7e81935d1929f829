"""The root logger as each test found it (tests/support/root_logging.py): the handler the
CLI's in-process ``main`` puts on a test's captured stderr must not outlive that test."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Two tests in a pytest of their own: the first configures logging as `main` does, on
# the stderr capsys gives it; the second logs an error after that capture has closed.
INNER = '''
import logging
import sys

from cronwire.config import load_settings
from cronwire.logs import configure_logging


def test_configures_logging_on_a_captured_stderr(capsys):
    configure_logging(load_settings({}), sys.stderr)


def test_logs_an_error_later():
    logging.getLogger("later").error("an error after the capture closed")
'''


def _inner(tmp_path: Path, *options: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "test_inner.py").write_text(INNER, encoding="utf-8")
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", *options,
         "test_inner.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT)})


def test_a_handler_left_on_a_closed_capture_is_taken_off_after_its_test(
    tmp_path: Path,
) -> None:
    left = _inner(tmp_path)
    assert "--- Logging error ---" in left.stderr, left.stderr  # the hazard, without it
    restored = _inner(tmp_path, "-p", "tests.support.root_logging")
    assert restored.returncode == 0, restored.stdout + restored.stderr
    assert "--- Logging error ---" not in restored.stderr, restored.stderr
