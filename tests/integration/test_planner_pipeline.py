"""The planner with several transactions in flight (ADR 0012): against real Postgres, every
occurrence is still written exactly once, and a helper that crashes fails the loop."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta

import asyncpg
import pytest

from cronwire.adapters.metrics import PrometheusMetrics
from cronwire.adapters.postgres.planner_store import Decide, PostgresPlannerStore
from cronwire.domain.model import run_id_for
from cronwire.service.planner import Planner
from cronwire.service.supervisor import LoopCrashed
from tests.integration.test_planner import CountingStore
from tests.support.planner_data import (
    ScheduleSpec,
    all_planned,
    create_tenant,
    insert_schedules,
    mismatches,
    runs_by_schedule,
    until,
)


class OverlapStore(CountingStore):
    """The counting store, also recording how many of its transactions were in flight at
    once."""

    def __init__(self, store: PostgresPlannerStore) -> None:
        super().__init__(store)
        self.in_flight = 0
        self.most_in_flight = 0

    async def plan_due(
        self, *, limit: int, lookahead_seconds: float, decide: Decide,
        ahead_seconds: float | None = None,
    ) -> tuple[int, int]:
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            return await super().plan_due(
                limit=limit, lookahead_seconds=lookahead_seconds, decide=decide,
                ahead_seconds=ahead_seconds)
        finally:
            self.in_flight -= 1


async def test_transactions_in_flight_write_every_burst_run_exactly_once(
    db_pool: asyncpg.Pool,
) -> None:
    tenant = await create_tenant(db_pool)
    now: datetime = await db_pool.fetchval("SELECT now()")
    instant = (now + timedelta(seconds=2)).replace(microsecond=0)
    # The burst's shape: one instant, ends_at on it, plus schedules with several runs due.
    specs = await insert_schedules(db_pool, tenant, [
        ScheduleSpec("* * * * * *", next_fire_at=instant, ends_at=instant) for _ in range(600)
    ] + [
        ScheduleSpec("* * * * * *", next_fire_at=instant, ends_at=instant + timedelta(seconds=2))
        for _ in range(100)
    ])
    store = OverlapStore(PostgresPlannerStore(db_pool))
    planner = Planner(store, PrometheusMetrics(), batch=25, tick_seconds=0.2,
                      lookahead_seconds=5, concurrency=3)
    stopping = asyncio.Event()
    task = asyncio.create_task(planner.run(stopping))
    try:
        await until(lambda: all_planned(db_pool), within=60)
    finally:
        stopping.set()
        await asyncio.wait_for(task, timeout=10)

    assert store.most_in_flight >= 2  # the helpers did overlap the main loop
    assert mismatches(specs, await runs_by_schedule(db_pool)) == []
    total = 600 + 100 * 3
    # SKIP LOCKED kept the claims disjoint: nothing was even planned twice.
    assert store.planned == planner.runs_inserted == total
    ids = await db_pool.fetch("SELECT id, schedule_id, scheduled_for FROM job_run")
    assert len(ids) == total
    assert all(r["id"] == run_id_for(r["schedule_id"], r["scheduled_for"]) for r in ids)


class HelperFails:
    """A store whose transactions fail with a bug (not a storage error) in helpers only."""

    def __init__(self) -> None:
        self.calls = 0

    async def plan_due(
        self, *, limit: int, lookahead_seconds: float, decide: Decide,
        ahead_seconds: float | None = None,
    ) -> tuple[int, int]:
        self.calls += 1
        await asyncio.sleep(0)
        task = asyncio.current_task()
        if task is not None and task.get_name() == "planner-helper":
            raise RuntimeError("bug in a helper transaction")
        return limit, limit  # always a full batch: more is due

    async def db_now(self) -> datetime:
        raise AssertionError("not used")


async def test_a_crashed_helper_fails_the_planner_loop() -> None:
    planner = Planner(HelperFails(), PrometheusMetrics(), batch=10, tick_seconds=0.1,
                      lookahead_seconds=5, concurrency=2)
    with pytest.raises(LoopCrashed) as crashed:
        await asyncio.wait_for(planner.run(asyncio.Event()), timeout=10)
    assert crashed.value.loop == "planner-helper"
    assert isinstance(crashed.value.__cause__, RuntimeError)


async def test_idle_planner_asks_the_database_from_one_loop_only(
    db_pool: asyncpg.Pool,
) -> None:
    store = OverlapStore(PostgresPlannerStore(db_pool))
    planner = Planner(store, PrometheusMetrics(), batch=25, tick_seconds=0.05,
                      lookahead_seconds=5, concurrency=3)
    stopping = asyncio.Event()
    task = asyncio.create_task(planner.run(stopping))
    try:
        for _ in range(5):
            assert (await asyncio.wait_for(planner.next_tick(), timeout=10)).schedules == 0
    finally:
        stopping.set()
        await asyncio.wait_for(task, timeout=10)
    assert store.most_in_flight == 1
