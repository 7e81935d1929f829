"""The Planner service over the in-memory planner store: due schedules become runs once,
cursors advance, a full batch ticks again at once."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta

from cronwire.adapters.memory import MemoryClock, MemoryDatabase, MemoryPlannerStore
from cronwire.domain.model import ScheduleStatus, Target
from cronwire.domain.schedules import ScheduleSpec
from cronwire.service.planner import Planner
from tests.support.fakes import CountingMetrics

EVERY_MINUTE = ScheduleSpec(name="m", cron="* * * * *", target=Target(url="http://x.test/"))


def _db_with(count: int) -> MemoryDatabase:
    db = MemoryDatabase(clock=MemoryClock(frozen=True))
    tenant = db.add_tenant()
    start = db.now().replace(second=0, microsecond=0) - timedelta(minutes=2)
    for _ in range(count):
        db.add_schedule(tenant, "http://x.test/", spec=EVERY_MINUTE, next_fire_at=start)
    return db


def _planner(db: MemoryDatabase, batch: int = 100) -> Planner:
    # No early pass (ahead_seconds=0): these tests count the look-ahead's ticks; the early
    # pass has its own (tests/contract/test_schedule_store_contract.py, ADR 0023).
    return Planner(MemoryPlannerStore(db), CountingMetrics(), batch=batch, tick_seconds=0.05,
                   lookahead_seconds=0, ahead_seconds=0)


async def test_a_tick_plans_the_missed_occurrences_and_advances_the_cursor() -> None:
    db = _db_with(2)
    result = await _planner(db).tick()
    assert (result.schedules, result.failed) == (2, False)
    assert result.runs_inserted == len(db.runs) >= 4  # two missed minutes and this one each
    for schedule in db.schedules.values():
        assert schedule.next_fire_at is not None and schedule.next_fire_at > db.now()
    again = await _planner(db).tick()
    assert (again.schedules, again.runs_inserted) == (0, 0)


async def test_an_occurrence_is_planned_once_even_when_the_cursor_is_set_back() -> None:
    db = _db_with(1)
    await _planner(db).tick()
    planned = len(db.runs)
    [schedule] = db.schedules.values()
    schedule.next_fire_at = min(r.scheduled_for for r in db.runs.values())
    result = await _planner(db).tick()
    assert result.runs_inserted == 0 and len(db.runs) == planned  # UNIQUE (schedule, time)


async def test_paused_schedules_are_left_alone_and_a_full_batch_ticks_again() -> None:
    db = _db_with(5)
    next(iter(db.schedules.values())).status = ScheduleStatus.PAUSED
    planner = _planner(db, batch=2)
    stopping = asyncio.Event()
    task = asyncio.create_task(planner.run(stopping))
    try:
        async with asyncio.timeout(5):
            while planner.schedules_claimed < 4:
                await planner.next_tick()
    finally:
        stopping.set()
        await task
    assert planner.schedules_claimed == 4
    assert {r.schedule_id for r in db.runs.values()} == {
        s.id for s in db.schedules.values() if s.status is ScheduleStatus.ACTIVE}


class HelperHeldOpen:
    """A store whose first main-loop transaction is a full batch (so a helper starts one)
    and whose helper transactions wait for ``release``; every other one finds nothing."""

    def __init__(self) -> None:
        self.calls = 0
        self.helper_in_flight = asyncio.Event()
        self.release = asyncio.Event()

    async def plan_due(self, *, limit: int, **_: object) -> tuple[int, int]:
        self.calls += 1
        await asyncio.sleep(0)  # a transaction yields to the event loop, as a real one does
        task = asyncio.current_task()
        if task is not None and task.get_name() == "planner-helper":
            self.helper_in_flight.set()
            await self.release.wait()
            return 0, 0
        return (limit, limit) if self.calls == 1 else (0, 0)

    async def db_now(self) -> datetime:
        raise AssertionError("not used")


async def test_stopping_while_a_helper_transaction_is_in_flight_ends_the_loop() -> None:
    # The bench_planner hang in CI: the loop's finally woke the idle helpers and waited for
    # them, but a helper still in its transaction came back with a batch that was not full,
    # put itself back to sleep and was never woken again.
    store = HelperHeldOpen()
    planner = Planner(store, CountingMetrics(), batch=10, tick_seconds=0.05,
                      lookahead_seconds=5, concurrency=2)
    stopping = asyncio.Event()
    task = asyncio.create_task(planner.run(stopping))
    try:
        await asyncio.wait_for(store.helper_in_flight.wait(), timeout=5)
        # A tick of the main loop after it: it came back short, so _busy is clear...
        await asyncio.wait_for(planner.next_tick(), timeout=5)
        stopping.set()
        # ...until the loop's last wake-up: its finally sets _busy, then waits for its helper.
        await asyncio.wait_for(planner._busy.wait(), timeout=5)
        assert not task.done()
        store.release.set()
        await asyncio.wait_for(asyncio.shield(task), timeout=5)
    finally:
        store.release.set()
        task.cancel()
