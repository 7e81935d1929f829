"""A regular wheel install carries the migrations: its `cronwire migrate` builds the schema.

The wheel is built from a copy of the source tree (pyproject, README, src, migrations), so
the check covers exactly what `pip install .` and the Dockerfile's build stage see. The
throwaway venv holds only the wheel; its dependencies come from this venv's
site-packages through PYTHONPATH (no .pth processing there, so the editable source tree
of this checkout cannot shadow the installed package).
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import shutil
import subprocess
import sys
import sysconfig
import uuid
import zipfile
from pathlib import Path

import asyncpg
import pytest

from cronwire.adapters.postgres.migrator import MIGRATIONS_DIR, discover
from cronwire.domain.errors import MigrationError
from tests.support.processes import clean_env
from tests.support.servers import with_database

REPO = Path(__file__).resolve().parents[2]


def _build_wheel(tmp_path: Path) -> Path:
    tree = tmp_path / "tree"
    tree.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, tree / name)
    shutil.copytree(REPO / "migrations", tree / "migrations")
    shutil.copytree(REPO / "src", tree / "src", symlinks=True,
                    ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    # This venv's setuptools and wheel when it has both (offline); else pip's isolated build.
    local = all(importlib.util.find_spec(name) for name in ("setuptools", "wheel"))
    flags = ["--no-build-isolation"] if local else []
    out = tmp_path / "dist"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", *flags, "-w", str(out),
         str(tree)],
        check=True, capture_output=True, text=True, timeout=300,
    )
    return next(out.glob("cronwire-*.whl"))


def _install(wheel: Path, tmp_path: Path) -> Path:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True,
                   timeout=120)
    python = venv / "bin" / "python"
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet",
         "--no-deps", "--no-index", str(wheel)],
        check=True, capture_output=True, text=True, timeout=300,
    )
    return venv


def _fetch(dsn: str, query: str) -> list[asyncpg.Record]:
    async def run() -> list[asyncpg.Record]:
        conn = await asyncpg.connect(dsn)
        try:
            return list(await conn.fetch(query))
        finally:
            await conn.close()

    return asyncio.run(run())


def test_installed_wheel_migrates_a_fresh_database(admin_dsn: str, tmp_path: Path) -> None:
    wheel = _build_wheel(tmp_path)
    packaged = sorted(n.removeprefix("cronwire/migrations/")
                      for n in zipfile.ZipFile(wheel).namelist()
                      if n.startswith("cronwire/migrations/"))
    # Every file of the top-level migrations/ is in the wheel, with nothing to list by hand.
    assert packaged == sorted(p.name for p in MIGRATIONS_DIR.glob("*.sql"))
    assert packaged, "the wheel ships no migrations"

    venv = _install(wheel, tmp_path)
    name = f"cw_wheel_{uuid.uuid4().hex[:8]}"
    _fetch(admin_dsn, f'CREATE DATABASE "{name}"')
    try:
        dsn = with_database(admin_dsn, name)
        env = clean_env(SCHEDULER_DATABASE_URL=dsn,
                        PYTHONPATH=sysconfig.get_paths()["purelib"])
        where = subprocess.run(
            [str(venv / "bin" / "python"), "-c", "import cronwire; print(cronwire.__file__)"],
            env=env, capture_output=True, text=True, timeout=60, check=True, cwd=tmp_path,
        )
        assert where.stdout.startswith(str(venv)), where.stdout  # the wheel, not ./src
        done = subprocess.run(
            [str(venv / "bin" / "cronwire"), "migrate"], env=env, capture_output=True,
            text=True, timeout=120, cwd=tmp_path, stdin=subprocess.DEVNULL,
        )
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout.strip().splitlines()[-1]) == {
            "applied": [m.version for m in discover()]
        }
        tables = {r["relname"] for r in _fetch(
            dsn, "SELECT relname FROM pg_class WHERE relnamespace = 'public'::regnamespace")}
        assert {"tenant", "schedule", "job_run", "job_run_attempt", "schema_migration"} <= tables

        # An install that lost its migration files refuses, in one line, instead of exit 0.
        installed = Path(where.stdout.strip()).parent / "migrations"
        for sql in installed.glob("*.sql"):
            sql.unlink()
        broken = subprocess.run(
            [str(venv / "bin" / "cronwire"), "migrate"], env=env, capture_output=True,
            text=True, timeout=120, cwd=tmp_path, stdin=subprocess.DEVNULL,
        )
        assert broken.returncode != 0
        assert len(broken.stderr.strip().splitlines()) == 1, broken.stderr
        assert "no migration files" in broken.stderr
    finally:
        _fetch(admin_dsn, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_a_migrator_without_migration_files_fails_loudly(tmp_path: Path) -> None:
    with pytest.raises(MigrationError, match="no migration files"):
        discover(tmp_path)
