"""The planner and the partition keeper against real Postgres: a run is never inserted
where no partition exists (so a tick never fails for it), retention never drops a month
that still holds unfinished runs, and fire_once's latest miss fires however old it is."""

from __future__ import annotations

import asyncio
import uuid
from datetime import datetime, timedelta

import asyncpg
import pytest

from cronwire.adapters.metrics import PrometheusMetrics
from cronwire.adapters.postgres.maintenance_store import PostgresMaintenanceStore
from cronwire.adapters.postgres.planner_store import PostgresPlannerStore
from cronwire.service.planner import Planner
from tests.support.planner_data import ScheduleSpec, create_tenant, insert_schedules, until

pytestmark = pytest.mark.asyncio

MINUTE = timedelta(minutes=1)


def planner(pool: asyncpg.Pool, lookahead_seconds: float) -> Planner:
    return Planner(PostgresPlannerStore(pool), PrometheusMetrics(), batch=100,
                   tick_seconds=1.0, lookahead_seconds=lookahead_seconds)


async def db_now(pool: asyncpg.Pool) -> datetime:
    now: datetime = await pool.fetchval("SELECT date_trunc('second', now())")
    return now


async def only_partition(pool: asyncpg.Pool, lo: datetime, hi: datetime) -> None:
    """Replace every job_run partition by one covering [lo, hi): what retention of one
    month leaves on the 1st (lo = this month) or a lookahead beyond the newest month."""
    names = await pool.fetch("SELECT c.relname FROM pg_inherits i JOIN pg_class c "
                             "ON c.oid = i.inhrelid WHERE i.inhparent = 'job_run'::regclass")
    for row in names:
        await pool.execute(f'ALTER TABLE job_run DETACH PARTITION "{row["relname"]}"')
        await pool.execute(f'DROP TABLE "{row["relname"]}"')
    await pool.execute(f"CREATE TABLE job_run_only PARTITION OF job_run "
                       f"FOR VALUES FROM ('{lo.isoformat()}') TO ('{hi.isoformat()}')")


async def test_catch_up_and_lookahead_beyond_the_partitions_never_fail_a_tick(
    db_pool: asyncpg.Pool,
) -> None:
    now = await db_now(db_pool)
    lo, hi = now - 30 * MINUTE, now + 10 * MINUTE
    await only_partition(db_pool, lo, hi)
    tenant = await create_tenant(db_pool)
    [late] = await insert_schedules(db_pool, tenant, [ScheduleSpec(
        "* * * * *", next_fire_at=now - 90 * MINUTE, window_seconds=7200)])

    first = await planner(db_pool, lookahead_seconds=3600).tick()
    assert not first.failed and first.runs_inserted > 0
    times = [r["scheduled_for"] for r in await db_pool.fetch(
        "SELECT scheduled_for FROM job_run ORDER BY 1")]
    assert times == late.expected(hi - timedelta(microseconds=1))[-len(times):]
    assert lo <= times[0] < lo + MINUTE and hi - MINUTE <= times[-1] < hi
    cursor = await db_pool.fetchval("SELECT next_fire_at FROM schedule")
    assert hi <= cursor < hi + MINUTE  # waits at the end of the last partition

    again = await planner(db_pool, lookahead_seconds=3600).tick()
    assert not again.failed and again.runs_inserted == 0
    assert await db_pool.fetchval("SELECT next_fire_at FROM schedule") == cursor


def month_start(now: datetime, offset: int) -> datetime:
    index = now.year * 12 + now.month - 1 + offset
    return now.replace(year=index // 12, month=index % 12 + 1, day=1, hour=0, minute=0,
                       second=0, microsecond=0)


async def insert_run(pool: asyncpg.Pool, when: datetime, status: str) -> uuid.UUID:
    run_id = uuid.uuid4()
    await pool.execute(
        "INSERT INTO job_run (id, tenant_id, schedule_id, scheduled_for, idempotency_key, "
        "fire_after, status) VALUES ($1, gen_random_uuid(), gen_random_uuid(), $2, 'k', $2, $3)",
        run_id, when, status)
    return run_id


async def test_retention_keeps_a_month_with_unfinished_runs_until_they_finish(
    db_pool: asyncpg.Pool,
) -> None:
    now = await db_now(db_pool)
    old, older = month_start(now, -5), month_start(now, -6)
    for start in (old, older):
        await db_pool.execute("SELECT cronwire_ensure_partitions($1::date, 1)", start.date())
    waiting = await insert_run(db_pool, old + timedelta(days=3), "retrying")
    await insert_run(db_pool, older + timedelta(days=3), "succeeded")
    store = PostgresMaintenanceStore(db_pool)
    suffix = f"p{old.year:04d}_{old.month:02d}"

    _, dropped = await store.maintain_partitions(2, 2)
    assert f"job_run_p{older.year:04d}_{older.month:02d}" in dropped
    assert not any(name.endswith(suffix) for name in dropped)
    assert await db_pool.fetchval("SELECT status FROM job_run WHERE id = $1", waiting)

    await db_pool.execute("UPDATE job_run SET status = 'failed' WHERE id = $1", waiting)
    _, dropped = await store.maintain_partitions(2, 2)
    assert sorted(dropped) == [f"job_run_attempt_{suffix}", f"job_run_{suffix}"]


async def test_fire_once_fires_a_yearly_miss_from_nine_days_ago(db_pool: asyncpg.Pool) -> None:
    now = await db_now(db_pool)
    missed = (now - timedelta(days=9)).replace(second=0)
    tenant = await create_tenant(db_pool)
    yearly = f"{missed.minute} {missed.hour} {missed.day} {missed.month} *"
    await insert_schedules(db_pool, tenant, [ScheduleSpec(
        yearly, next_fire_at=missed - MINUTE, policy="fire_once")])
    result = await planner(db_pool, lookahead_seconds=5).tick()
    assert not result.failed
    rows = await db_pool.fetch("SELECT scheduled_for, status FROM job_run")
    assert [(r["scheduled_for"], r["status"]) for r in rows] == [(missed, "pending")]


async def pending_detaches(pool: asyncpg.Pool) -> list[str]:
    rows = await pool.fetch("SELECT c.relname FROM pg_inherits i JOIN pg_class c "
                            "ON c.oid = i.inhrelid WHERE i.inhdetachpending ORDER BY 1")
    return [row["relname"] for row in rows]


async def test_an_interrupted_concurrent_detach_is_finalized_and_dropped(
    db_pool: asyncpg.Pool, database_url: str
) -> None:
    now = await db_now(db_pool)
    old = month_start(now, -6)
    await db_pool.execute("SELECT cronwire_ensure_partitions($1::date, 1)", old.date())
    name = f"job_run_p{old.year:04d}_{old.month:02d}"
    # An open snapshot makes DETACH ... CONCURRENTLY wait in its second transaction, after
    # the first one has marked the partition "detach pending"; cancelling it there leaves
    # the partition pending, as a crash or a restart of the keeper would.
    reader = await asyncpg.connect(database_url)
    detacher = await asyncpg.connect(database_url)
    try:
        await reader.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        await reader.fetchval("SELECT count(*) FROM job_run")
        detach = asyncio.create_task(detacher.execute(
            f'ALTER TABLE job_run DETACH PARTITION "{name}" CONCURRENTLY'))
        await until(lambda: _pending(db_pool, name), 20)
        await db_pool.execute("SELECT pg_cancel_backend($1)", detacher.get_server_pid())
        with pytest.raises(asyncpg.QueryCanceledError):
            await asyncio.wait_for(detach, 20)
        await reader.execute("ROLLBACK")
    finally:
        await reader.close()
        await detacher.close()
    assert await pending_detaches(db_pool) == [name]

    _, dropped = await PostgresMaintenanceStore(db_pool).maintain_partitions(2, 3)
    assert name in dropped and f"job_run_attempt_p{old.year:04d}_{old.month:02d}" in dropped
    assert await pending_detaches(db_pool) == []
    assert await db_pool.fetchval("SELECT to_regclass($1)", name) is None


async def _pending(pool: asyncpg.Pool, name: str) -> bool:
    return name in await pending_detaches(pool)
