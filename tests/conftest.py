"""Session-wide real servers and per-test isolated databases.

Fixtures for tests:
- ``database_url``: DSN of a fresh, migrated database of its own (cloned from a template).
- ``db_pool``: an asyncpg pool on that database (UTC, jsonb codecs).
- ``admin_dsn``: the server's admin DSN, for tests that create databases themselves.
- ``kafka_bootstrap``: a running Kafka broker, once per kind in
  ``tests.support.brokers.KAFKA_BROKERS`` (tansu and one Apache Kafka node; started on
  first use). ``tansu_bootstrap``, ``apache_kafka`` and ``apache_kafka_cluster`` (3 nodes)
  are the session brokers behind it.
- ``own_kafka``: a broker of each kind for one test to stop and start (not started).
- ``pg_pair`` / ``async_pg_pair``: a Postgres failover pair (primary and hot standby,
  synchronous or not) of one test's own, to kill and promote (tests/support/pg_ha.py).

How the tests spread over pytest-xdist's workers, and the closing list of skipped tests:
tests/support/suite_plugin.py (its hooks are imported here).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import asyncpg
import pytest

from cronwire.adapters.embedded.kafka import EmbeddedBroker
from cronwire.adapters.embedded.postgres_pair import EmbeddedPostgresPair
from cronwire.adapters.postgres.pool import create_pool
from tests.support.apache_kafka import KafkaCluster
from tests.support.brokers import (
    KAFKA_BROKERS,
    OWN_BROKERS,
    StandaloneKafka,
    apache_kafka_server,
    bootstrap_of,
    broker_params,
    own_broker,
)
from tests.support.pg_ha import postgres_pair
from tests.support.root_logging import root_logging_as_found  # noqa: F401  (autouse)
from tests.support.servers import DatabaseFactory, kafka_server, own_directory, postgres_server
from tests.support.suite_plugin import (  # noqa: F401  (hooks: pytest finds them by name)
    pytest_collection_finish,
    pytest_collection_modifyitems,
    pytest_configure,
    pytest_runtest_teardown,
    pytest_terminal_summary,
)

# platformdirs (via testcontainers/embedded packages) warns without XDG_RUNTIME_DIR.
os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")


@pytest.fixture(scope="session")
def servers_dir() -> Iterator[Path]:
    """Where the session's servers keep their data (see ``own_directory`` for why not
    under ``tmp_path``)."""
    with own_directory("cronwire-servers-") as path:
        yield path


@pytest.fixture
def server_dir() -> Iterator[Path]:
    """A directory of this test's own for a server's data (an embedded Postgres, a
    `cronwire serve` home, a load test's --out): see ``own_directory``."""
    with own_directory() as path:
        yield path


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
def tansu_bootstrap(servers_dir: Path) -> Iterator[str]:
    with kafka_server(servers_dir) as bootstrap:
        yield bootstrap


@pytest.fixture(scope="session")
def apache_kafka(servers_dir: Path) -> Iterator[KafkaCluster | str]:
    with apache_kafka_server(servers_dir, nodes=1) as server:
        yield server


@pytest.fixture(scope="session")
def apache_kafka_cluster(servers_dir: Path) -> Iterator[KafkaCluster | str]:
    with apache_kafka_server(servers_dir, nodes=3) as server:
        yield server


@pytest.fixture(params=broker_params(*KAFKA_BROKERS))
def kafka_bootstrap(request: pytest.FixtureRequest) -> str:
    return bootstrap_of(request, request.param)


@pytest.fixture(params=OWN_BROKERS)
def own_kafka(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[EmbeddedBroker | StandaloneKafka]:
    """A broker of each kind this test owns (it may stop and start it), not started yet."""
    broker = own_broker(request.param, tmp_path)
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture
def pg_pair() -> Iterator[EmbeddedPostgresPair]:
    """A synchronous failover pair of this test's own."""
    with postgres_pair(synchronous=True) as pair:
        yield pair


@pytest.fixture
def async_pg_pair() -> Iterator[EmbeddedPostgresPair]:
    """An asynchronous failover pair of this test's own."""
    with postgres_pair(synchronous=False) as pair:
        yield pair

