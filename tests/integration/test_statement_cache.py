"""The pool keeps the claim as a prepared statement: planned once per connection, not on
every call (asyncpg caches only statements up to a size, and the claim outgrew the
default: each call then parsed and planned ~20 KB of SQL again, ~6 ms)."""

from __future__ import annotations

import pytest

from cronwire.adapters.postgres.pool import create_pool
from cronwire.adapters.postgres.sql import queries

Q = queries()


@pytest.mark.asyncio
@pytest.mark.parametrize("name, args", [
    ("job_run_claim", ["owner", 10, 30.0, 0.0, None]),
    ("job_run_sweep", ["owner", 10, 30.0, 5.0, None]),
])
async def test_the_claims_are_prepared_once_and_kept(database_url: str, name: str,
                                                     args: list[object]) -> None:
    pool = await create_pool(database_url, 1)
    try:
        async with pool.acquire() as conn:
            for _ in range(3):
                async with conn.transaction():
                    await conn.fetch(Q[name], *args)
            kept = await conn.fetchval(
                "SELECT count(*) FROM pg_prepared_statements WHERE statement = $1", Q[name])
    finally:
        await pool.close()
    assert kept == 1
