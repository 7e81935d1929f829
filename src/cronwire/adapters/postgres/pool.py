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


async def create_pool(dsn: str, size: int, **kwargs: Any) -> asyncpg.Pool:
    pool = await asyncpg.create_pool(
        dsn,
        min_size=1,
        max_size=size,
        init=_init_connection,
        server_settings={"timezone": "UTC", "application_name": "cronwire"},
        **kwargs,
    )
    assert pool is not None
    return pool
