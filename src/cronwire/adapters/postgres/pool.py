"""The asyncpg connection pools: UTC sessions and JSON codecs for jsonb, on the server of
the URL that suits (connect.py): the writable primary for the writer's pool, any server
the read URL names for the history's read pool."""

from __future__ import annotations

import json
from typing import Any

import asyncpg

from cronwire.adapters.postgres.connect import (
    ServerFinder,
    ServerTurnedReadOnly,
    reports_read_only,
)

READ_POOL_CONNECT_SECONDS = 2.0  # a standby that does not answer: the primary serves sooner


async def _init_connection(conn: asyncpg.Connection) -> None:
    for type_name in ("json", "jsonb"):
        await conn.set_type_codec(
            type_name, encoder=json.dumps, decoder=json.loads, schema="pg_catalog"
        )


async def _keep_session(conn: asyncpg.Connection) -> None:
    """What a released connection needs beyond asyncpg's own rollback of an open
    transaction: nothing. The default reset sends ``pg_advisory_unlock_all(); CLOSE ALL;
    UNLISTEN *; RESET ALL`` - one more round trip for every pooled query, ~5% of an
    executor's CPU in the burst (ADR 0012). cronwire sets no session state on pooled
    connections (settings are fixed at connect time, no LISTEN, no cursors left open),
    and its one session-level advisory lock (partition upkeep) is released in a
    ``finally`` on the same connection."""
    return None


# The claim statements read the configured per-tenant concurrency default from this
# session setting (ADR 0040): it is the replica's configuration, fixed at connect time,
# and a parameter would differ between the claim statements that share their text.
TENANT_MAX_CONCURRENCY_SETTING = "cronwire.tenant_max_concurrency"


async def _writable_only(conn: asyncpg.Connection) -> None:
    """On every acquire of a writer's connection, with no round trip: a connection whose
    server reported itself read-only is closed by the pool, and the caller gets a storage
    error (its loop retries; the pool connects anew, to the primary). The server reports
    a change with its answer to the next statement, so the first write after a fence fails
    with ReadOnlySQLTransactionError, and the connection is never written through."""
    if reports_read_only(conn):
        raise ServerTurnedReadOnly("the server turned read-only (a fenced or demoted "
                                   "primary); connection dropped")


# asyncpg prepares and keeps (per connection) only statements up to 15 KiB by default; a
# longer one is parsed and planned again on every call. The claim statements grew past
# that with flow control (~20 KB with their comments): re-planning them cost ~6 ms a claim,
# 45 µs of Postgres per run in a burst. Every statement of queries/ fits under this
# (tests/unit/test_queries.py), so each is planned once per connection, then cached.
MAX_CACHEABLE_STATEMENT_BYTES = 64 * 1024


async def create_pool(dsn: str, size: int, *, read_only: bool = False,
                      tenant_max_concurrency: int | None = None,
                      **kwargs: Any) -> asyncpg.Pool:
    """A pool on the primary of ``dsn`` or, ``read_only``, on any server it names: then
    sessions are read-only too, and no connection is opened before the first read (a
    standby that is down must not stop a replica from starting)."""
    kwargs.setdefault("reset", _keep_session)
    kwargs.setdefault("max_cacheable_statement_size", MAX_CACHEABLE_STATEMENT_BYTES)
    settings = {"timezone": "UTC", "application_name": "cronwire"}
    if tenant_max_concurrency is not None:
        settings[TENANT_MAX_CONCURRENCY_SETTING] = str(tenant_max_concurrency)
    if read_only:
        settings["default_transaction_read_only"] = "on"
        kwargs.setdefault("min_size", 0)
        finder = ServerFinder(dsn, writable=False, timeout=READ_POOL_CONNECT_SECONDS)
    else:
        kwargs.setdefault("setup", _writable_only)
        finder = ServerFinder(dsn, writable=True)
    pool = await asyncpg.create_pool(
        dsn,
        min_size=kwargs.pop("min_size", 1),
        max_size=size,
        connect=finder.connect,
        init=_init_connection,
        server_settings=settings,
        **kwargs,
    )
    assert pool is not None
    return pool
