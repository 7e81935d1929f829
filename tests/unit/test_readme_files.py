"""Every file or directory the README names exists in the repository (a new user follows
those names: a missing one is a broken promise, like the ARCHITECTURE.md it once named)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# A name with a file extension, or a `backticked/` directory.
FILE_NAME = re.compile(r"(?<![\w/.:-])([\w.-]+(?:/[\w.*-]+)*\.(?:md|py|toml|ya?ml|sql|png|txt))\b")
DIRECTORY = re.compile(r"`((?:[\w.-]+/)+)`")
# Where a short name may live: the repository root, the package, or beside the code.
BASES = [ROOT, ROOT / "src" / "cronwire", ROOT / "src"]
# Named as a place for the user's own file, not as a file the repository ships.
USER_FILES = {"config/cronwire.toml"}


def named_paths(text: str) -> set[str]:
    text = re.sub(r"https?://\S+", "", text)  # links elsewhere are not ours to check
    return {m for m in FILE_NAME.findall(text)} | {m for m in DIRECTORY.findall(text)}


def exists(name: str) -> bool:
    if any(list(base.glob(name)) for base in BASES):
        return True
    if "/" not in name:  # a bare module name (ports.py): somewhere in the package
        return any((ROOT / "src").rglob(name))
    return False


def test_every_file_the_readme_names_exists() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    names = named_paths(readme)
    assert "ADRs/" in names and "config/cronwire.example.toml" in names  # the scan works
    missing = sorted(name for name in names - USER_FILES if not exists(name))
    assert not missing, f"README.md names files that do not exist: {missing}"
