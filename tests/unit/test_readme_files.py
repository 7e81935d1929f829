"""Every file or directory the README and the docs/ pages name exists in the repository (a
reader follows those names: a missing one is a broken promise, like the ARCHITECTURE.md the
README once named)."""

from __future__ import annotations

import os
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# A name with a file extension, or a `backticked/` directory.
FILE_NAME = re.compile(r"(?<![\w/.:-])([\w.-]+(?:/[\w.*-]+)*\.(?:md|py|toml|ya?ml|sql|png|txt))\b")
DIRECTORY = re.compile(r"`((?:[\w.-]+/)+)`")
# Where a short name may live: the repository root, the package, or beside the code.
BASES = [ROOT, ROOT / "src" / "cronwire", ROOT / "src"]
# Named as a place for the user's own file, or a file a command writes when it runs (the
# load test's report, the browser tests' screenshots, the old statements a benchmark compares
# against, which the user writes out with `git show`), not as a file the repository ships.
USER_FILES = {"config/cronwire.toml", "report.png", "report.json", "test-artifacts/browser/",
              "OLD_job_run.sql", "OLD_schedule.sql",
              # a user's own schedule definitions and CI output (docs/schedules-as-code.md)
              "schedules/all.yaml", "schedules/billing.yaml", "plan.txt"}
DOCS = sorted((ROOT / "docs").glob("*.md"))


def named_paths(text: str) -> set[str]:
    text = re.sub(r"https?://\S+", "", text)  # links elsewhere are not ours to check
    return {m for m in FILE_NAME.findall(text)} | {m for m in DIRECTORY.findall(text)}


def _repository_files() -> set[str]:
    """Base names of the repository's files (virtualenvs, caches and dot-dirs left out)."""
    names: set[str] = set()
    for _top, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if not d.startswith(".") and d not in {"venv", "__pycache__"}]
        names.update(files)
    return names


def exists(name: str) -> bool:
    if any(list(base.glob(name)) for base in BASES):
        return True
    # A bare name (ports.py, alerts.test.yaml) is read next to the path the text gives.
    return "/" not in name and name in _repository_files()


def test_every_file_the_readme_names_exists() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    names = named_paths(readme)
    assert "ADRs/" in names and "config/cronwire.example.toml" in names  # the scan works
    missing = sorted(name for name in names - USER_FILES if not exists(name))
    assert not missing, f"README.md names files that do not exist: {missing}"


def test_every_file_the_docs_pages_name_exists() -> None:
    assert DOCS, "no docs/*.md found"
    missing: list[str] = []
    for page in DOCS:
        names = named_paths(page.read_text(encoding="utf-8"))
        # A name beside the page (console-schedules.png) is read from docs/ itself.
        missing += [f"{page.name}: {name}" for name in sorted(names - USER_FILES)
                    if not exists(name) and not (page.parent / name).exists()]
    assert not missing, f"docs pages name files that do not exist: {missing}"
