"""The asyncpg connection pool: UTC sessions and JSON codecs for jsonb."""

from __future__ import annotations

import json
from typing import Any

import asyncpg


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


async def create_pool(dsn: str, size: int, *, tenant_max_concurrency: int | None = None,
                      **kwargs: Any) -> asyncpg.Pool:
    kwargs.setdefault("reset", _keep_session)
    settings = {"timezone": "UTC", "application_name": "cronwire"}
    if tenant_max_concurrency is not None:
        settings[TENANT_MAX_CONCURRENCY_SETTING] = str(tenant_max_concurrency)
    pool = await asyncpg.create_pool(
        dsn,
        min_size=1,
        max_size=size,
        init=_init_connection,
        server_settings=settings,
        **kwargs,
    )
    assert pool is not None
    return pool
