"""Session-wide real servers and per-test isolated databases.

Fixtures for tests:
- ``database_url``: DSN of a fresh, migrated database of its own (cloned from a template).
- ``db_pool``: an asyncpg pool on that database (UTC, jsonb codecs).
- ``admin_dsn``: the server's admin DSN, for tests that create databases themselves.
- ``kafka_bootstrap``: a running Kafka-wire broker (started on first use).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import asyncpg
import pytest

from cronwire.adapters.postgres.pool import create_pool
from tests.support.servers import DatabaseFactory, kafka_server, postgres_server

# platformdirs (via testcontainers/embedded packages) warns without XDG_RUNTIME_DIR.
os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")


@pytest.fixture(scope="session")
def servers_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("servers")


@pytest.fixture(scope="session")
def admin_dsn(servers_dir: Path) -> Iterator[str]:
    with postgres_server(servers_dir) as dsn:
        yield dsn


@pytest.fixture(scope="session")
def database_factory(admin_dsn: str) -> Iterator[DatabaseFactory]:
    factory = DatabaseFactory(admin_dsn)
    factory.build_template()
    yield factory
    factory.drop_template()


@pytest.fixture
async def database_url(database_factory: DatabaseFactory) -> AsyncIterator[str]:
    name, dsn = await database_factory.create()
    yield dsn
    await database_factory.drop(name)


@pytest.fixture
async def db_pool(database_url: str) -> AsyncIterator[asyncpg.Pool]:
    pool = await create_pool(database_url, 10)
    yield pool
    await pool.close()


@pytest.fixture(scope="session")
def kafka_bootstrap(servers_dir: Path) -> Iterator[str]:
    with kafka_server(servers_dir) as bootstrap:
        yield bootstrap
