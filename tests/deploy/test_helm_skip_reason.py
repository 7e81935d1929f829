"""Without helm, the chart tests' skip reason tells a new user what to install and how
("no helm: shared/tools/get-helm is not beside the repository" meant nothing).
The chart test module runs as it is, from a copy with no shared/tools beside it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

CHART_TESTS = Path(__file__).resolve().parent / "test_helm_chart.py"


def test_the_no_helm_skip_says_what_to_install_and_how(tmp_path: Path) -> None:
    copy = tmp_path / "repo" / "tests" / "deploy" / CHART_TESTS.name
    copy.parent.mkdir(parents=True)
    shutil.copy(CHART_TESTS, copy)
    env = {k: v for k, v in os.environ.items() if k != "CRONWIRE_HELM"}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", str(copy), "-rs", "-q", "-p", "no:cacheprovider",
         "-p", "no:xdist", "-k", "lint"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    text = " ".join(done.stdout.split())
    assert "SKIPPED" in text, done.stdout + done.stderr
    assert "CRONWIRE_HELM" in text, text  # the one variable to set
    assert "get-helm" in text and "helm.sh" in text, text  # and two ways to get a helm
