"""The composition root's small typed factories, for every entry point besides a serving
replica (which builds :class:`cronwire.bootstrap.container.Container`): the CLI's operator commands,
the load-test and chaos harnesses' set-up, and the one home of the claim-mode checks.

Like container.py, this module may import adapters; the commands and harnesses import
only this. Each factory opens what it needs for one job and closes it afterwards.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any, LiteralString

import asyncpg

from cronwire.adapters.crypto.envelope import EnvelopeSecretBox
from cronwire.adapters.crypto.key_ring import KeyRing
from cronwire.adapters.otel.setup import check_tracing
from cronwire.adapters.postgres.data_key_store import PostgresDataKeyStore
from cronwire.adapters.postgres.databases import create_database
from cronwire.adapters.postgres.driver_errors import DRIVER_ERRORS
from cronwire.adapters.postgres.maintenance_store import PostgresMaintenanceStore
from cronwire.adapters.postgres.migrator import is_current, migrate
from cronwire.adapters.postgres.pool import create_pool
from cronwire.adapters.postgres.sql import parse_queries, queries
from cronwire.adapters.postgres.tenants import PostgresTenantStore
from cronwire.adapters.skewed_clock import SKEW_VARIABLE
from cronwire.config import Settings, parse_key_ring
from cronwire.domain.errors import ConfigError
from cronwire.ports.secrets import SecretBox
from cronwire.service import maintenance
from cronwire.service.maintenance import PartitionKeeper
from cronwire.service.secret_keys import key_status, prove_key_ring, rotate_data_keys

# What `cronwire tenant ...` works on: tenants and their tokens (create, issue, list, revoke).
TenantAdmin = PostgresTenantStore
# The harnesses' handle on their own database (they read and seed it with their own SQL).
Pool = asyncpg.Pool
# What a database that cannot be used raises (refused connection, server error), for
# commands that report it in one line.
DATABASE_ERRORS = DRIVER_ERRORS
COMMAND_POOL_SIZE = 2  # one command, one statement at a time
READINESS_TIMEOUT_SECONDS = 2.0

# What a chaos run sets in one replica's environment to skew its clock by that many seconds.
CLOCK_SKEW_VARIABLE = SKEW_VARIABLE

__all__ = [
    "CLOCK_SKEW_VARIABLE", "DATABASE_ERRORS", "Pool", "TenantAdmin", "blank_database",
    "check_buildable", "database_checks", "fresh_database", "harness_queries", "key_upkeep",
    "migrate", "open_pool", "partition_upkeep", "secret_box", "tenant_admin", "uses_kafka",
]


# -- claim mode: the one place that decides what kafka mode needs --


def uses_kafka(settings: Settings) -> bool:
    """Kafka mode's clients run on replicas that plan or execute (the API never needs them)."""
    return settings.claim_source == "kafka" and bool(settings.roles & {"planner", "executor"})


def check_buildable(settings: Settings) -> None:
    """Refuse, before starting anything, a configuration this replica cannot run: in kafka
    mode, an explicit broker that nobody answers at; an OTLP endpoint without the SDK."""
    check_tracing(os.environ)
    if uses_kafka(settings) and settings.kafka_bootstrap_servers is not None:
        from cronwire.adapters.kafka.link import unreachable_servers  # aiokafka: kafka mode only

        silent = unreachable_servers(settings.kafka_bootstrap_servers, within=5.0)
        if silent:
            raise ConfigError(
                f"SCHEDULER_KAFKA_BOOTSTRAP_SERVERS: no Kafka broker answers at "
                f"{', '.join(silent)}"
            )


# -- sealed secrets: a box on a pool, for the harnesses' seeding and commands --


def secret_box(pool: asyncpg.Pool, secret_keys: str) -> SecretBox:
    """The envelope box over ``pool`` with the key ring ``secret_keys`` (KEY_ID:BASE64,...)."""
    ring = KeyRing(parse_key_ring("SCHEDULER_SECRET_KEYS", secret_keys))
    return EnvelopeSecretBox(ring, PostgresDataKeyStore(pool))


# -- the database: pools, readiness --


async def open_pool(dsn: str, size: int = COMMAND_POOL_SIZE) -> asyncpg.Pool:
    """A pool with cronwire's session settings and jsonb codecs; the caller closes it."""
    return await create_pool(dsn, size)


async def database_checks(pool: asyncpg.Pool, checks: dict[str, bool]) -> None:
    """/readyz's database figures into ``checks``, each as soon as it is known (a failure
    half-way keeps the first): the database answers in time, every migration is applied.
    ``migrations`` is reported only once the database answered: while it is down nothing is
    known about them (and its runbook, roll back the image, would be the wrong advice)."""
    async with pool.acquire(timeout=READINESS_TIMEOUT_SECONDS) as conn:
        checks["database"] = await conn.fetchval(queries()["database_ping"]) is not None
        checks["migrations"] = False
        checks["migrations"] = await is_current(conn)


# -- operator commands --


@contextlib.asynccontextmanager
async def tenant_admin(settings: Settings) -> AsyncIterator[TenantAdmin]:
    """The tenant store on ``settings.database_url`` (migrated first with auto-migrate)."""
    assert settings.database_url is not None, "the CLI resolves the embedded database first"
    if settings.auto_migrate:
        await migrate(settings.database_url)
    pool = await open_pool(settings.database_url)
    try:
        yield PostgresTenantStore(pool)
    finally:
        await pool.close()


@contextlib.contextmanager
def quiet(logger: logging.Logger) -> Iterator[None]:
    """``logger``'s info lines held back for the block (warnings still pass)."""
    level = logger.level
    logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        logger.setLevel(level)


async def key_upkeep(settings: Settings, *, rotate: bool) -> dict[str, Any]:
    """`cronwire keys status|rotate`: the data keys per key id, after re-wrapping every
    one under the first key when ``rotate`` (online, batched, resumable; ADR 0061)."""
    assert settings.database_url is not None, "the CLI resolves the embedded database first"
    if not settings.secret_keys:
        raise ConfigError("SCHEDULER_SECRET_KEYS: not set; the key ring is what the data "
                          "keys are wrapped with")
    ring = KeyRing(settings.secret_keys)
    pool = await open_pool(settings.database_url)
    try:
        store = PostgresDataKeyStore(pool)
        await prove_key_ring(ring, store)
        started = time.monotonic()
        rewrapped = await rotate_data_keys(ring, store) if rotate else None
        counts = dict(await key_status(store))
        report: dict[str, Any] = {
            "sealing_key_id": ring.sealing_key_id, "data_keys_by_key_id": counts,
            "unused_key_ids": [k for k in ring.key_ids if k not in counts]}
        if rotate:
            report |= {"rewrapped": rewrapped,
                       "seconds": round(time.monotonic() - started, 3)}
        return report
    finally:
        await pool.close()


async def partition_upkeep(settings: Settings) -> dict[str, Any]:
    """One pass of the partition keeper (as serve runs hourly) and the partitions after it."""
    assert settings.database_url is not None, "the CLI resolves the embedded database first"
    if settings.auto_migrate:
        await migrate(settings.database_url)
    pool = await open_pool(settings.database_url)
    try:
        store = PostgresMaintenanceStore(pool)
        keeper = PartitionKeeper(store, retention_months=settings.retention_months,
                                 interval_seconds=0,
                                 audit_retention_days=settings.audit_retention_days)
        # The keeper's own pass without its log line: the command prints what it did.
        with quiet(maintenance.log):
            created, dropped = await keeper.run_once()
        return {"created": created, "dropped": dropped, "partitions": await store.partitions(),
                "alert_events_deleted": keeper.alert_events_deleted,
                "audit_partitions": await store.audit_partitions(),
                "audit_rows_deleted": keeper.audit_rows_deleted}
    finally:
        await pool.close()


# -- harness set-up (`cronwire loadtest`, `cronwire chaos`) --


async def blank_database(admin_dsn: str, name: str) -> str:
    """A new, empty database ``name`` on the server of ``admin_dsn`` (the load test's
    baselines install their own tables); returns its DSN."""
    return await create_database(admin_dsn, name)


async def fresh_database(admin_dsn: str, name: str) -> str:
    """A new, migrated database ``name`` on the server of ``admin_dsn``; returns its DSN."""
    dsn = await blank_database(admin_dsn, name)
    await migrate(dsn)
    return dsn


def production_queries() -> dict[str, LiteralString]:
    """Every production statement by its ``-- name:`` (the load test names what
    ``pg_stat_statements`` measured with them)."""
    return queries()


def harness_queries(path: Path) -> dict[str, LiteralString]:
    """A harness's own SQL file (beside its code, never among the production queries),
    split by the production parser into its ``-- name: ...`` statements."""
    return parse_queries(path.read_text(encoding="utf-8"))
