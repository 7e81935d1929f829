"""Real servers for tests: Postgres and a Kafka-wire broker, never mocks.

Order of preference, for each: an explicit URL from the environment
(SCHEDULER_TEST_DATABASE_URL / SCHEDULER_TEST_KAFKA_BOOTSTRAP), then testcontainers
when a Docker engine answers, then the embedded servers shipped as wheels.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import socket
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import asyncpg

from cronwire.adapters.embedded.kafka import EmbeddedBroker
from cronwire.adapters.embedded.postgres import FAST_UNSAFE_SETTINGS, EmbeddedPostgres
from cronwire.adapters.postgres.migrator import migrate


def docker_available() -> bool:
    """True when a Docker engine answers on its socket (the CLI alone is not enough)."""
    host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    if not host.startswith("unix://"):
        return True  # a remote engine was configured explicitly; let testcontainers try it
    path = host.removeprefix("unix://")
    if not Path(path).exists():
        return False
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(2)
        try:
            sock.connect(path)
            sock.sendall(b"GET /_ping HTTP/1.0\r\n\r\n")
            return b" 200 " in sock.recv(64)
        except OSError:
            return False


# Room a tmpfs must have to hold the suite's servers (a container's default 64 MiB does not).
_TMPFS_MIN_BYTES = 4 << 30


def data_root() -> str | None:
    """Where test servers keep their data: CRONWIRE_TEST_DATA_DIR, else /dev/shm when it
    is a writable tmpfs with room, else the system's temporary directory (None). On this
    machine's ext4 a CREATE DATABASE from the migrated template (about 1,200 files) took
    0.45 s, nearly all of it system time, against 0.05 s on tmpfs, and every test that
    touches Postgres makes one. The servers already run without fsync: nothing here is
    meant to survive the machine."""
    explicit = os.environ.get("CRONWIRE_TEST_DATA_DIR")
    if explicit:
        return explicit
    shm = "/dev/shm"
    try:
        room = os.statvfs(shm)
    except OSError:
        return None
    if not os.access(shm, os.W_OK) or room.f_bavail * room.f_frsize < _TMPFS_MIN_BYTES:
        return None
    return shm


@contextlib.contextmanager
def own_directory(prefix: str = "cronwire-test-") -> Iterator[Path]:
    """A new directory for a server's data, removed afterwards. Not under pytest's
    ``tmp_path``: every pytest start chmods its root (``/tmp/pytest-of-<user>``) back to
    0700, and as root the embedded Postgres runs as ``cronwire-pg``, which would then lose
    its way to the data of a server still running (another run's, or an xdist worker's)."""
    path = Path(tempfile.mkdtemp(prefix=prefix, dir=data_root()))
    path.chmod(0o711)  # as a project directory is: others may pass through, not list it
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def with_database(dsn: str, database: str) -> str:
    parts = urlsplit(dsn)
    return urlunsplit(parts._replace(path=f"/{database}"))


@contextlib.contextmanager
def postgres_server(workdir: Path) -> Iterator[str]:
    """Yield an admin DSN of a running Postgres server."""
    explicit = os.environ.get("SCHEDULER_TEST_DATABASE_URL")
    if explicit:
        yield explicit
        return
    if docker_available():
        from testcontainers.postgres import PostgresContainer  # type: ignore[import-untyped]

        with PostgresContainer("postgres:17", driver=None) as container:
            yield container.get_connection_url()
        return
    server = EmbeddedPostgres(workdir / "pg", settings=dict(FAST_UNSAFE_SETTINGS))
    server.start()
    try:
        yield server.dsn
    finally:
        server.stop()


@contextlib.contextmanager
def kafka_server(workdir: Path) -> Iterator[str]:
    """Yield a Kafka bootstrap address of a running broker."""
    explicit = os.environ.get("SCHEDULER_TEST_KAFKA_BOOTSTRAP")
    if explicit:
        yield explicit
        return
    if docker_available():
        from testcontainers.kafka import KafkaContainer  # type: ignore[import-untyped]

        with KafkaContainer() as container:
            yield container.get_bootstrap_server()
        return
    broker = EmbeddedBroker(workdir / "tansu.log")
    broker.start()
    try:
        yield broker.bootstrap
    finally:
        broker.stop()


class DatabaseFactory:
    """Per-test databases cloned from one migrated template (no rows shared between tests)."""

    def __init__(self, admin_dsn: str) -> None:
        self.admin_dsn = admin_dsn
        self.template = f"cronwire_template_{uuid.uuid4().hex[:8]}"

    async def _admin(self, sql: str) -> None:
        conn = await asyncpg.connect(self.admin_dsn)
        try:
            await conn.execute(sql)
        finally:
            await conn.close()

    def build_template(self) -> None:
        async def build() -> None:
            await self._admin(f'CREATE DATABASE "{self.template}"')
            await migrate(with_database(self.admin_dsn, self.template))
            await self._admin(f'ALTER DATABASE "{self.template}" WITH IS_TEMPLATE true')

        asyncio.run(build())

    async def create(self) -> tuple[str, str]:
        name = f"cw_test_{uuid.uuid4().hex[:12]}"
        # FILE_COPY (PostgreSQL 15+): the template's ~10 MB copied as files, not written
        # block by block through the WAL as the default WAL_LOG does; measured on the test
        # server, create 12-15 ms instead of 19-28 and drop 6-7 instead of 15, for each of
        # the ~1,500 databases a run makes.
        await self._admin(
            f'CREATE DATABASE "{name}" TEMPLATE "{self.template}" STRATEGY FILE_COPY')
        return name, with_database(self.admin_dsn, name)

    async def drop(self, name: str) -> None:
        await self._admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def drop_template(self) -> None:
        async def drop() -> None:
            await self._admin(f'ALTER DATABASE "{self.template}" WITH IS_TEMPLATE false')
            await self._admin(f'DROP DATABASE IF EXISTS "{self.template}" WITH (FORCE)')

        asyncio.run(drop())
