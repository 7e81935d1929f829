"""The planner against real Postgres: concurrency, replans, pause/resume, misfires, failures."""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta

import asyncpg
import pytest

from cronwire.adapters.metrics import PrometheusMetrics
from cronwire.adapters.postgres.planner_store import PostgresPlannerStore
from cronwire.adapters.postgres.pool import create_pool
from cronwire.bootstrap.container import build_container, init_resources, shutdown_resources
from cronwire.bootstrap.runtime import role_loops
from cronwire.config import Settings
from cronwire.domain.errors import StorageError
from cronwire.domain.model import PlanDecision, idempotency_key_for, run_id_for
from cronwire.service.planner import Planner
from tests.support.planner_data import (
    CountingStore,
    ScheduleSpec,
    all_planned,
    create_tenant,
    insert_schedules,
    mismatches,
    runs_by_schedule,
    spread_workload,
    until,
)
from tests.support.secrets import TEST_SECRET_KEYS

HOUR = timedelta(hours=1)


def make_planner(pool: asyncpg.Pool, *, batch: int = 500, tick: float = 1.0) -> Planner:
    return Planner(PostgresPlannerStore(pool), PrometheusMetrics(), batch=batch,
                   tick_seconds=tick, lookahead_seconds=5)


@pytest.fixture
async def tenant(db_pool: asyncpg.Pool) -> uuid.UUID:
    return await create_tenant(db_pool)


async def db_now(pool: asyncpg.Pool) -> datetime:
    now: datetime = await pool.fetchval("SELECT now()")
    return now


@pytest.mark.slow
async def test_three_planners_make_exactly_one_run_per_occurrence(
    database_url: str, db_pool: asyncpg.Pool, tenant: uuid.UUID
) -> None:
    specs = await insert_schedules(db_pool, tenant, spread_workload(await db_now(db_pool), 2000))
    assert all(len(s.expected()) == 32 for s in specs)
    pools = [await create_pool(database_url, 2) for _ in range(3)]
    stores = [CountingStore(PostgresPlannerStore(pool)) for pool in pools]
    planners = [Planner(store, PrometheusMetrics(), batch=40, tick_seconds=1,
                        lookahead_seconds=5) for store in stores]
    stopping = asyncio.Event()
    tasks = [asyncio.create_task(p.run(stopping)) for p in planners]
    try:
        await until(lambda: all_planned(db_pool), within=90)
    finally:
        stopping.set()
        await asyncio.wait_for(asyncio.gather(*tasks), timeout=10)
        for pool in pools:
            await pool.close()

    found = await runs_by_schedule(db_pool)
    assert mismatches(specs, found) == []
    total = sum(len(s.expected()) for s in specs)
    assert sum(len(v) for v in found.values()) == total == 64_000
    # Guard 1 on its own: no occurrence was even planned twice (SKIP LOCKED + advance).
    assert sum(s.planned for s in stores) == total
    assert sum(p.runs_inserted for p in planners) == total
    assert all(p.schedules_claimed > 0 for p in planners), [p.schedules_claimed for p in planners]
    bad = await db_pool.fetchval(
        """SELECT count(*) FROM job_run WHERE status <> 'pending' OR trigger <> 'schedule'
           OR fire_after <> scheduled_for"""
    )
    assert bad == 0


async def test_run_rows_carry_deterministic_ids_and_keys(
    db_pool: asyncpg.Pool, tenant: uuid.UUID
) -> None:
    now = await db_now(db_pool)
    [spec] = await insert_schedules(db_pool, tenant, [ScheduleSpec(
        "*/2 * * * * *", next_fire_at=now - timedelta(seconds=10), ends_at=now)])
    await make_planner(db_pool).tick()
    rows = await db_pool.fetch("SELECT * FROM job_run ORDER BY scheduled_for")
    assert [r["scheduled_for"] for r in rows] == spec.expected()
    for row in rows:
        assert row["id"] == run_id_for(spec.id, row["scheduled_for"])
        assert row["idempotency_key"] == idempotency_key_for(row["id"])
        assert row["tenant_id"] == tenant and row["finished_at"] is None


async def test_moving_next_fire_at_backwards_creates_no_duplicate(
    db_pool: asyncpg.Pool, tenant: uuid.UUID
) -> None:
    now = await db_now(db_pool)
    start = now.replace(microsecond=0) - timedelta(seconds=30)
    specs = await insert_schedules(db_pool, tenant, [
        ScheduleSpec("* * * * * *", next_fire_at=start, ends_at=start + timedelta(seconds=20))
        for _ in range(50)
    ])
    planner = make_planner(db_pool)
    first = await planner.tick()
    assert first.runs_inserted == 50 * 21
    # The executor finished one run; a replan must not overwrite it.
    done = await db_pool.fetchval(
        """UPDATE job_run SET status = 'succeeded', finished_at = now()
           WHERE scheduled_for = $1 AND schedule_id = $2 RETURNING id""", start, specs[0].id)
    # Operator replan / clock jump: every cursor goes back 10 s before everything planned,
    # and the end moves 5 s later, so the replan overlaps old runs and adds new ones.
    await db_pool.execute(
        """UPDATE schedule SET next_fire_at = $1, ends_at = ends_at + interval '5 seconds'""",
        start - timedelta(seconds=10),
    )
    second = await planner.tick()
    assert not second.failed and second.schedules == 50
    assert second.runs_inserted == 50 * (10 + 5)  # only the occurrences not planned before
    extended = [dataclasses.replace(s, next_fire_at=start - timedelta(seconds=10),
                                    ends_at=start + timedelta(seconds=25)) for s in specs]
    assert mismatches(extended, await runs_by_schedule(db_pool)) == []
    assert await db_pool.fetchval("SELECT status FROM job_run WHERE id = $1", done) == "succeeded"


async def test_paused_schedule_gets_no_runs_and_resumes_with_its_misfire_policy(
    db_pool: asyncpg.Pool, tenant: uuid.UUID
) -> None:
    now = await db_now(db_pool)
    [spec] = await insert_schedules(db_pool, tenant, [ScheduleSpec(
        "* * * * *", next_fire_at=now - 2 * HOUR, policy="skip", status="paused")])
    planner = make_planner(db_pool)
    result = await planner.tick()
    assert (result.schedules, result.runs_inserted) == (0, 0)
    assert await db_pool.fetchval("SELECT count(*) FROM job_run") == 0
    assert await db_pool.fetchval("SELECT next_fire_at FROM schedule") == spec.next_fire_at

    await db_pool.execute("UPDATE schedule SET status = 'active'")
    result = await planner.tick()
    assert result.schedules == 1
    counts = dict(await db_pool.fetch("SELECT status, count(*) FROM job_run GROUP BY 1"))
    assert counts["skipped"] >= 118 and counts.get("pending", 0) <= 2
    next_fire = await db_pool.fetchval("SELECT next_fire_at FROM schedule")
    assert next_fire > now
    # Paused again while due: the cursor stays where it is and nothing more is written.
    await db_pool.execute("UPDATE schedule SET status = 'paused', next_fire_at = now()")
    assert (await planner.tick()).schedules == 0


async def _outage(
    pool: asyncpg.Pool, tenant: uuid.UUID, policy: str
) -> tuple[dict[str, list[datetime]], datetime, datetime, ScheduleSpec]:
    """One every-minute schedule whose planner was down for two hours; then one tick."""
    now = await db_now(pool)
    [spec] = await insert_schedules(pool, tenant, [ScheduleSpec(
        "* * * * *", next_fire_at=now - 2 * HOUR, policy=policy, window_seconds=3600)])
    before = await db_now(pool)
    await make_planner(pool).tick()
    after = await db_now(pool)
    rows = await pool.fetch(
        "SELECT status, scheduled_for, finished_at, last_error FROM job_run ORDER BY 2")
    by_status: dict[str, list[datetime]] = {"pending": [], "skipped": []}
    for row in rows:
        by_status[row["status"]].append(row["scheduled_for"])
        assert (row["finished_at"] is not None) == (row["status"] == "skipped")
        assert (row["last_error"] is not None) == (row["status"] == "skipped")
    # Whatever the policy, every occurrence up to the new cursor has exactly one row.
    cursor = await pool.fetchval("SELECT next_fire_at FROM schedule")
    covered = dataclasses.replace(spec, ends_at=cursor - timedelta(microseconds=1)).expected()
    assert sorted(by_status["pending"] + by_status["skipped"]) == covered
    assert len(covered) >= 120 and cursor > before
    return by_status, before, after, spec


async def test_outage_fire_all_runs_the_catchup_window_and_skips_the_rest(
    db_pool: asyncpg.Pool, tenant: uuid.UUID
) -> None:
    runs, before, after, _ = await _outage(db_pool, tenant, "fire_all")
    assert all(t >= before - HOUR for t in runs["pending"])
    assert all(t < after - HOUR for t in runs["skipped"])
    assert 59 <= len(runs["skipped"]) <= 61 and 60 <= len(runs["pending"]) <= 62


async def test_outage_fire_once_runs_only_the_latest_missed(
    db_pool: asyncpg.Pool, tenant: uuid.UUID
) -> None:
    runs, before, after, _ = await _outage(db_pool, tenant, "fire_once")
    late, *on_time = runs["pending"]
    assert late < after - timedelta(seconds=60)
    assert all(t < late for t in runs["skipped"])
    # Besides the one catch-up run, only occurrences inside the 60 s tolerance fire.
    assert all(t >= before - timedelta(seconds=60) for t in on_time)
    assert len(on_time) <= 2 and len(runs["skipped"]) >= 117


async def test_outage_skip_fires_nothing_missed(
    db_pool: asyncpg.Pool, tenant: uuid.UUID
) -> None:
    runs, before, after, _ = await _outage(db_pool, tenant, "skip")
    assert all(t >= before - timedelta(seconds=60) for t in runs["pending"])
    assert all(t < after - timedelta(seconds=60) for t in runs["skipped"])
    assert len(runs["skipped"]) >= 119 and len(runs["pending"]) <= 2


async def test_full_batch_ticks_again_at_once_and_stopping_ends_the_wait(
    db_pool: asyncpg.Pool, tenant: uuid.UUID
) -> None:
    now = await db_now(db_pool)
    await insert_schedules(db_pool, tenant, [
        ScheduleSpec("* * * * * *", next_fire_at=now - timedelta(seconds=5), ends_at=now)
        for _ in range(35)
    ])
    metrics = PrometheusMetrics()
    # A 60 s tick: finishing within the deadline is only possible without waiting between
    # full batches. One transaction at a time and no early pass (ahead_seconds no further
    # than the look-ahead), so the look-ahead's ticks can be counted exactly.
    planner = Planner(PostgresPlannerStore(db_pool), metrics, batch=10, tick_seconds=60,
                      lookahead_seconds=5, concurrency=1, ahead_seconds=5)
    stopping = asyncio.Event()
    task = asyncio.create_task(planner.run(stopping))
    await until(lambda: all_planned(db_pool), within=20)
    await until(_ticks(planner, 4), within=5)
    assert (planner.ticks, planner.schedules_claimed) == (4, 35)  # 10 + 10 + 10 + 5
    assert b"scheduler_planner_tick_seconds_count 4.0" in metrics.exposition()
    stopping.set()
    await asyncio.wait_for(task, timeout=2)


def _ticks(planner: Planner, count: int) -> Callable[[], Awaitable[bool]]:
    async def reached() -> bool:
        return planner.ticks >= count

    return reached


async def test_failed_tick_writes_nothing_and_the_loop_retries(
    db_pool: asyncpg.Pool, tenant: uuid.UUID
) -> None:
    now = await db_now(db_pool)
    [spec] = await insert_schedules(db_pool, tenant, [
        ScheduleSpec("* * * * * *", next_fire_at=now - timedelta(seconds=3), ends_at=now)])
    # A real database error inside the transaction, after the claim: run inserts violate it.
    await db_pool.execute(
        "ALTER TABLE job_run ADD CONSTRAINT planner_test_block CHECK (trigger <> 'schedule')")
    planner = make_planner(db_pool, tick=0.05)
    stopping = asyncio.Event()
    task = asyncio.create_task(planner.run(stopping))
    try:
        failed = await asyncio.wait_for(planner.next_tick(), timeout=10)
        assert failed.failed
        assert await db_pool.fetchval("SELECT count(*) FROM job_run") == 0
        assert await db_pool.fetchval("SELECT next_fire_at FROM schedule") == spec.next_fire_at
        assert not task.done()  # the loop survived the failure
        await db_pool.execute("ALTER TABLE job_run DROP CONSTRAINT planner_test_block")
        await until(lambda: all_planned(db_pool), within=10)
    finally:
        stopping.set()
        await asyncio.wait_for(task, timeout=5)
    assert planner.failed_ticks >= 1
    assert mismatches([spec], await runs_by_schedule(db_pool)) == []


async def test_container_runs_the_planner_for_the_planner_role(
    database_url: str, db_pool: asyncpg.Pool, tenant: uuid.UUID
) -> None:
    now = await db_now(db_pool)
    [spec] = await insert_schedules(db_pool, tenant, [
        ScheduleSpec("*/5 * * * * *", next_fire_at=now - timedelta(seconds=20), ends_at=now)])
    settings = Settings(database_url=database_url, roles=frozenset({"planner"}), db_pool_size=2,
                        secret_keys=TEST_SECRET_KEYS)
    container = build_container(settings)
    await init_resources(container)
    try:
        loops = await role_loops(container, settings)
        assert set(loops) >= {"planner"}
        stopping = asyncio.Event()
        task = asyncio.ensure_future(loops["planner"](stopping))
        await until(lambda: all_planned(db_pool), within=10)
        stopping.set()
        await asyncio.wait_for(task, timeout=5)
        no_planner = dataclasses.replace(settings, roles=frozenset({"api"}))
        assert "planner" not in await role_loops(container, no_planner)
    finally:
        await shutdown_resources(container)
    assert mismatches([spec], await runs_by_schedule(db_pool)) == []


async def test_store_reads_the_database_clock_and_translates_driver_errors(
    database_url: str, db_pool: asyncpg.Pool
) -> None:
    before = await db_now(db_pool)
    pool = await create_pool(database_url, 1)
    store = PostgresPlannerStore(pool)
    now = await store.db_now()
    assert before <= now <= await db_now(db_pool)
    await pool.close()  # what a planner sees when its database goes away
    with pytest.raises(StorageError):
        await store.db_now()
    with pytest.raises(StorageError):
        await store.plan_due(limit=10, lookahead_seconds=5,
                             decide=lambda s, n, w: PlanDecision([], []))
