"""The count behind SCHEDULER_TENANT_MAX_PENDING_RUNS must not make one tenant pay for
another's volume: a tenant with few runs is counted through the index, even on a pooled
connection whose prepared count last served a tenant with tens of thousands (where a plan
for "any tenant" scans all of job_run). Rows read by sequential scans are the measure
(pg_stat_xact_user_tables: this transaction's own), not time."""

from __future__ import annotations

from datetime import timedelta

import asyncpg

from cronwire.adapters.postgres.tenants import PostgresTenantStore
from cronwire.adapters.postgres.volume import locked_open_runs, open_runs
from tests.support.api import insert_runs

BIG = 20_000
SEQ_ROWS_READ = """SELECT COALESCE(sum(seq_tup_read), 0) FROM pg_stat_xact_user_tables
                    WHERE relname LIKE 'job_run%'"""


async def _tenant_with_runs(pool: asyncpg.Pool, name: str, runs: int) -> object:
    tenant = (await PostgresTenantStore(pool).create(name)).tenant_id
    schedule = await pool.fetchval(
        "INSERT INTO schedule (id, tenant_id, name, cron, timezone, target, retry, "
        "next_fire_at, signing_secret) VALUES (gen_random_uuid(), $1, 'x', '* * * * *', "
        "'UTC', '{}'::jsonb, '{}'::jsonb, now(), 'whsec_x') RETURNING id", tenant)
    if runs:
        newest = await pool.fetchval("SELECT date_trunc('second', now()) - interval '1 s'")
        await insert_runs(pool, tenant, schedule, runs, newest=newest,
                          step=timedelta(milliseconds=10),
                          statuses=["pending", "running", "retrying", "succeeded"])
    return tenant


async def test_a_small_tenant_is_counted_through_the_index_after_a_big_one(
    db_pool: asyncpg.Pool,
) -> None:
    big = await _tenant_with_runs(db_pool, "big", BIG)
    small = await _tenant_with_runs(db_pool, "small", 3)
    await db_pool.execute("ANALYZE job_run")
    async with db_pool.acquire() as conn:
        for _ in range(8):  # past the 5 runs after which a prepared statement may go generic
            async with conn.transaction():
                assert (await locked_open_runs(conn, big, 100_000)).counted == BIG * 3 // 4
        for count in (locked_open_runs, open_runs):
            async with conn.transaction():
                before = await conn.fetchval(SEQ_ROWS_READ)
                assert (await count(conn, small, 100_000)).counted == 3
                assert await conn.fetchval(SEQ_ROWS_READ) == before, count.__name__
