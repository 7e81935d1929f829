"""Flow control in the claim statements, against real Postgres (ADR 0040): a key's
concurrency and rate, a Retry-After hold, the tenant's limit, slots given back by every
write that ends a lease (and kept by an expired lease's re-claim), and a held backlog that
holds back nobody else."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import replace

import asyncpg

from cronwire.adapters.postgres.claim_source import PostgresClaimSource
from cronwire.adapters.postgres.keyed_claims import PostgresKeyedClaims
from cronwire.adapters.postgres.maintenance_store import PostgresMaintenanceStore
from cronwire.adapters.postgres.pool import create_pool
from cronwire.adapters.postgres.run_store import PostgresRunStore
from cronwire.adapters.postgres.sql import queries
from cronwire.domain.model import RunStatus
from cronwire.harness.seeding import (
    SeededSchedule,
    seed_due_run_ids,
    seed_due_runs,
    seed_flow_control,
    seed_schedule,
    seed_tenant,
)
from tests.support.resolutions import resolution
from tests.support.secrets import secret_box

URL = "http://127.0.0.1:9/hook"
KEY = "billing-api"


async def _keyed(pool: asyncpg.Pool, runs: int, tenant: uuid.UUID | None = None,
                 **limits: float | None) -> SeededSchedule:
    """A schedule of ``tenant`` (a new one by default) under KEY with ``limits``, and
    ``runs`` due runs of it."""
    if tenant is None:
        tenant = await seed_tenant(pool)
    schedule = await seed_schedule(pool, tenant, URL)
    await seed_flow_control(pool, schedule, KEY, **limits)  # type: ignore[arg-type]
    await seed_due_runs(pool, schedule, runs)
    return schedule


async def _flow_row(pool: asyncpg.Pool, tenant: uuid.UUID, key: str = KEY) -> asyncpg.Record:
    row: asyncpg.Record = await pool.fetchrow(
        "SELECT in_flight, held_until, tokens FROM flow_control WHERE tenant_id = $1 AND key = $2",
        tenant, key)
    return row


async def _running(pool: asyncpg.Pool) -> int:
    return int(await pool.fetchval("SELECT count(*) FROM job_run WHERE status = 'running'"))


async def test_concurrent_claimers_never_lease_more_than_max_concurrency(
        db_pool: asyncpg.Pool) -> None:
    schedule = await _keyed(db_pool, 60, max_concurrency=5)
    source = PostgresClaimSource(db_pool, secret_box(db_pool))
    for _ in range(3):  # rounds of four replicas claiming at once
        batches = await asyncio.gather(*(source.claim(f"r{i}", 20, 30) for i in range(4)))
        assert sum(len(b.runs) for b in batches) <= 5
        assert await _running(db_pool) <= 5
    assert await _running(db_pool) == 5
    assert (await _flow_row(db_pool, schedule.tenant_id))["in_flight"] == 5
    pending = await db_pool.fetchval("SELECT count(*) FROM job_run WHERE status = 'pending'")
    assert pending == 55  # held back runs stay pending, untouched


async def test_a_claim_in_flight_holds_the_keys_row_against_another_replicas_claim(
        db_pool: asyncpg.Pool) -> None:
    # Deterministic form of the race above: replica A's claim has admitted its five but
    # not committed; replica B's claim must not admit five more from the same counts.
    schedule = await _keyed(db_pool, 30, max_concurrency=5)
    claim = queries("job_run")["job_run_claim"]
    async with db_pool.acquire() as conn_a, db_pool.acquire() as conn_b:
        async with conn_a.transaction():
            taken = await conn_a.fetch(claim, "a", 20, 30.0, 0.0, None)
            assert len(taken) == 5
            async with conn_b.transaction():
                # B must pass the locked row by, not wait for it (nor count past it): a
                # wait would hang here, so a generous bound turns it into a failure.
                await conn_b.execute("SET LOCAL statement_timeout = '60s'")
                assert await conn_b.fetch(claim, "b", 20, 30.0, 0.0, None) == []
    assert await _running(db_pool) == 5
    assert (await _flow_row(db_pool, schedule.tenant_id))["in_flight"] == 5


async def test_slots_come_back_when_leases_end_and_stay_with_an_expired_lease(
        db_pool: asyncpg.Pool) -> None:
    schedule = await _keyed(db_pool, 20, max_concurrency=3)
    source, store = PostgresClaimSource(db_pool, secret_box(db_pool)), PostgresRunStore(db_pool)
    runs = list((await source.claim("a", 10, 30)).runs)
    assert len(runs) == 3
    # One succeeds, one is released (shutdown), one is failed by the last-resort write.
    await store.resolve("a", [resolution(runs[0], RunStatus.SUCCEEDED)])
    await store.release("a", [(runs[1].id, runs[1].scheduled_for, runs[1].lease_generation)])
    assert await store.fail_minimal("a", runs[2].id, runs[2].scheduled_for, "gave up",
                                    runs[2].lease_generation)
    assert (await _flow_row(db_pool, schedule.tenant_id))["in_flight"] == 0
    again = (await source.claim("b", 10, 30)).runs
    assert len(again) == 3
    # A replica killed -9 holds its slots until its leases expire; the re-claim of those
    # very runs keeps them (no slot is taken twice, none leaks).
    await db_pool.execute("UPDATE job_run SET claim_expires_at = now() - interval '1 second' "
                          "WHERE status = 'running'")
    reclaimed = (await source.claim("c", 10, 30)).runs
    assert {r.id for r in reclaimed} == {r.id for r in again}
    assert (await _flow_row(db_pool, schedule.tenant_id))["in_flight"] == 3
    await store.resolve("c", [resolution(r, RunStatus.SUCCEEDED) for r in reclaimed])
    assert (await _flow_row(db_pool, schedule.tenant_id))["in_flight"] == 0


async def test_the_rate_bucket_admits_burst_then_rate_per_second(db_pool: asyncpg.Pool) -> None:
    schedule = await _keyed(db_pool, 30, rate_per_second=2, burst=3)
    source = PostgresClaimSource(db_pool, secret_box(db_pool))
    assert len((await source.claim("a", 20, 30)).runs) == 3  # the full bucket
    assert len((await source.claim("a", 20, 30)).runs) == 0  # empty until it refills
    # One second of refill, on the database's clock (no sleeping): two more tokens.
    await db_pool.execute("UPDATE flow_control SET tokens_at = tokens_at - interval '1 second' "
                          "WHERE tenant_id = $1 AND key = $2", schedule.tenant_id, KEY)
    assert len((await source.claim("a", 20, 30)).runs) == 2
    assert len((await source.claim("a", 20, 30)).runs) == 0


async def test_a_retry_after_holds_the_whole_key_and_not_the_tenants_other_runs(
        db_pool: asyncpg.Pool) -> None:
    schedule = await _keyed(db_pool, 10)  # a key with no limits: only backpressure
    other = await seed_schedule(db_pool, schedule.tenant_id, URL)
    source, store = PostgresClaimSource(db_pool, secret_box(db_pool)), PostgresRunStore(db_pool)
    [first] = (await source.claim("a", 1, 30)).runs
    throttled = replace(resolution(first, RunStatus.RETRYING, delay=1.0), hold_seconds=3600.0)
    await store.resolve("a", [throttled])
    row = await _flow_row(db_pool, schedule.tenant_id)
    assert row["held_until"] is not None
    await seed_due_runs(db_pool, other, 4)  # no key: not held
    runs = (await source.claim("b", 20, 30)).runs
    assert {r.schedule_id for r in runs} == {other.id} and len(runs) == 4


async def test_a_held_backlog_does_not_fill_the_tenants_share(db_pool: asyncpg.Pool) -> None:
    # 200 runs of a held key are older than the tenant's three other runs; the claim's
    # share per tenant (2 x its limit) must not be spent on them.
    schedule = await _keyed(db_pool, 200)
    await db_pool.execute("UPDATE flow_control SET held_until = now() + interval '1 hour' "
                          "WHERE tenant_id = $1 AND key = $2", schedule.tenant_id, KEY)
    other = await seed_schedule(db_pool, schedule.tenant_id, URL)
    await seed_due_runs(db_pool, other, 3, due_seconds_ago=0.5)
    runs = (await PostgresClaimSource(db_pool, secret_box(db_pool)).claim("a", 4, 30)).runs
    assert {r.schedule_id for r in runs} == {other.id} and len(runs) == 3


async def test_another_tenant_is_claimed_beside_a_key_at_its_limit(db_pool: asyncpg.Pool) -> None:
    busy = await _keyed(db_pool, 500, max_concurrency=2)
    quiet_tenant = await seed_tenant(db_pool)
    quiet = await seed_schedule(db_pool, quiet_tenant, URL)
    await seed_due_runs(db_pool, quiet, 5, due_seconds_ago=0.1)
    source = PostgresClaimSource(db_pool, secret_box(db_pool))
    first = (await source.claim("a", 10, 30)).runs
    assert sum(r.tenant_id == busy.tenant_id for r in first) == 2
    assert sum(r.tenant_id == quiet_tenant for r in first) == 5


async def test_the_tenants_limit_counts_every_run_of_the_tenant(db_pool: asyncpg.Pool) -> None:
    tenant = await seed_tenant(db_pool)
    await db_pool.execute("UPDATE tenant SET max_concurrency = 3 WHERE id = $1", tenant)
    plain = await seed_schedule(db_pool, tenant, URL)
    await seed_due_runs(db_pool, plain, 5)
    await _keyed(db_pool, 5, tenant=tenant, max_concurrency=10)
    source, store = PostgresClaimSource(db_pool, secret_box(db_pool)), PostgresRunStore(db_pool)
    runs = (await source.claim("a", 20, 30)).runs
    assert len(runs) == 3
    assert (await _flow_row(db_pool, tenant, ""))["in_flight"] == 3
    assert (await source.claim("a", 20, 30)).runs == ()
    await store.resolve("a", [resolution(runs[0], RunStatus.SUCCEEDED)])
    assert len((await source.claim("a", 20, 30)).runs) == 1
    assert (await _flow_row(db_pool, tenant, ""))["in_flight"] == 3


async def test_the_configured_tenant_default_applies_where_the_tenant_sets_none(
        database_url: str) -> None:
    pool = await create_pool(database_url, 2, tenant_max_concurrency=2)
    try:
        tenant = await seed_tenant(pool)
        await seed_due_runs(pool, await seed_schedule(pool, tenant, URL), 6)
        assert len((await PostgresClaimSource(pool, secret_box(pool)).claim("a", 20, 30)).runs) == 2
    finally:
        await pool.close()


async def test_kafka_modes_claims_admit_by_the_same_rules(db_pool: asyncpg.Pool) -> None:
    schedule = await _keyed(db_pool, 0, max_concurrency=4)
    ids = await seed_due_run_ids(db_pool, schedule, 10)
    times = dict(await db_pool.fetch("SELECT id, scheduled_for FROM job_run "
                                     "WHERE id = ANY($1::uuid[])", ids))
    claims = PostgresKeyedClaims(db_pool, secret_box(db_pool))
    batch = await claims.claim_keys("k", [(i, times[i]) for i in ids], 30)
    assert len(batch.runs) == 4
    assert batch.held == 6  # left runnable and due: the hybrid source reclaims them
    swept = await claims.sweep("k", 10, 30, 0)
    assert swept.runs == ()  # the key is full: the sweeper passes its runs over
    assert (await _flow_row(db_pool, schedule.tenant_id))["in_flight"] == 4


async def test_the_waiting_gauge_counts_due_runs_of_keys_that_admit_nothing(
        db_pool: asyncpg.Pool) -> None:
    store = PostgresMaintenanceStore(db_pool)
    full = await _keyed(db_pool, 7, max_concurrency=2)
    assert await store.flow_waiting() == 0  # nothing in flight yet: the key admits
    assert len((await PostgresClaimSource(db_pool, secret_box(db_pool)).claim("a", 20, 30)).runs) == 2
    assert await store.flow_waiting() == 5
    other = await seed_schedule(db_pool, full.tenant_id, URL)  # no key: never counted
    await seed_due_runs(db_pool, other, 3)
    assert await store.flow_waiting() == 5
