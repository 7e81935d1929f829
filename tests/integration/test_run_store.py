"""PostgresRunStore beyond the shared contract (tests/contract/test_run_store_contract.py
runs every RunStore rule against Postgres and the in-memory fake): what only the real
tables show."""

from __future__ import annotations

import asyncpg

from cronwire.adapters.postgres.claim_source import PostgresClaimSource
from cronwire.adapters.postgres.maintenance_store import PostgresMaintenanceStore
from cronwire.harness.seeding import seed_due_runs, seed_schedule, seed_tenant
from tests.support.secrets import secret_box

URL = "http://127.0.0.1:9/hook"


async def test_due_backlog_counts_due_and_in_flight_runs(db_pool: asyncpg.Pool) -> None:
    async with db_pool.acquire() as conn:
        schedule = await seed_schedule(conn, await seed_tenant(conn), URL)
        await seed_due_runs(conn, schedule, 4)
        await seed_due_runs(conn, schedule, 5, first=1000, due_seconds_ago=-600)  # not due yet
    await PostgresClaimSource(db_pool, secret_box(db_pool)).claim("a", 1, 30)
    assert await PostgresMaintenanceStore(db_pool).due_backlog() == 4  # the gauge's source
