"""The RunCommands contract (backfill and replay), against PostgresRunCommands on real
Postgres and the in-memory fake: one run per occurrence, what a dry run counts, and a
failed run replayed once."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta

import pytest

from cronwire.domain.backfill import BackfillPlan, BackfillRequest, plan_backfill
from cronwire.domain.errors import LimitExceeded, NotFound, StateConflict
from cronwire.domain.model import OverlapPolicy, Trigger
from cronwire.domain.replay import ReplayQuery
from cronwire.domain.schedules import ScheduleSpec
from cronwire.domain.volume import DEFAULT_MAX_PENDING_RUNS as ROOMY
from tests.support.worlds import STORES, World, world_for


@pytest.fixture(params=STORES)
def world(request: pytest.FixtureRequest) -> World:
    return world_for(request)


def planner(start: datetime, end: datetime, policy: OverlapPolicy | None = None,
            ) -> object:
    request = BackfillRequest(start, end, policy)

    def plan(spec: ScheduleSpec, db_now: datetime, oldest: datetime | None) -> BackfillPlan:
        return plan_backfill(spec, request, db_now, oldest)

    return plan


async def window(world: World, minutes: int) -> tuple[datetime, datetime]:
    """The last ``minutes`` whole minutes before now (the seeded cron is every minute)."""
    end = (await world.db_now()).replace(second=0, microsecond=0)
    return end - timedelta(minutes=minutes), end


async def test_a_backfill_writes_one_run_per_occurrence_once(world: World) -> None:
    schedule = await world.seed(0)
    start, end = await window(world, 10)
    dry = await world.commands.backfill(schedule.tenant_id, schedule.id,
                                        planner(start, end), dry_run=True, max_pending_runs=ROOMY)  # type: ignore[arg-type]
    assert (dry.occurrences, dry.created, dry.existing) == (10, 0, 0)
    assert dry.first == [start + timedelta(minutes=m) for m in range(10)]
    assert await world.count("pending") == 0
    done = await world.commands.backfill(schedule.tenant_id, schedule.id,
                                         planner(start, end), dry_run=False, max_pending_runs=ROOMY)  # type: ignore[arg-type]
    assert (done.occurrences, done.created, done.existing) == (10, 10, 0)
    assert [at for _, at in await world.keys()] == dry.first
    wider = await world.commands.backfill(
        schedule.tenant_id, schedule.id, planner(start - timedelta(minutes=5), end),  # type: ignore[arg-type]
        dry_run=False, max_pending_runs=ROOMY)
    assert (wider.occurrences, wider.created, wider.existing) == (15, 5, 10)
    assert await world.count("pending") == 15
    rows = await world.rows()
    assert all(r.due_in <= 0.001 for r in rows)  # due at once


async def test_a_backfill_of_another_tenants_schedule_is_not_found(world: World) -> None:
    schedule = await world.seed(0)
    start, end = await window(world, 2)
    with pytest.raises(NotFound):
        await world.commands.backfill(uuid.uuid4(), schedule.id, planner(start, end),  # type: ignore[arg-type]
                                      dry_run=True, max_pending_runs=ROOMY)


async def test_a_failed_run_is_replayed_once(world: World) -> None:
    schedule = await world.seed(3)
    await world.set_all(status="failed")
    keys = await world.keys()
    replay = await world.commands.replay(schedule.tenant_id, keys[0][0], max_pending_runs=ROOMY)
    assert (replay.trigger, replay.replay_of, replay.status.value) == (
        Trigger.REPLAY, keys[0][0], "pending")
    assert replay.scheduled_for.microsecond != 0 and replay.id != keys[0][0]
    with pytest.raises(StateConflict, match="replayed already"):
        await world.commands.replay(schedule.tenant_id, keys[0][0], max_pending_runs=ROOMY)
    with pytest.raises(StateConflict, match="only failed runs"):
        await world.commands.replay(schedule.tenant_id, replay.id, max_pending_runs=ROOMY)
    with pytest.raises(NotFound):
        await world.commands.replay(uuid.uuid4(), keys[1][0], max_pending_runs=ROOMY)
    bulk = await world.commands.replay_failed(schedule.tenant_id, ReplayQuery(limit=10),
                                              max_pending_runs=ROOMY)
    assert len(bulk) == 2  # the two not replayed yet, oldest first
    assert await world.commands.replay_failed(schedule.tenant_id, ReplayQuery(),
                                              max_pending_runs=ROOMY) == []
    assert await world.count("pending") == 3


async def test_runs_past_the_pending_limit_are_refused_whole(world: World) -> None:
    """ADR 0055: backfill, replay and trigger stop at the tenant's runs not yet ended; the
    limit is checked against what the request really adds, and nothing is written when it
    is refused."""
    schedule = await world.seed(0)
    tenant = schedule.tenant_id
    start, end = await window(world, 10)
    middle = start + timedelta(minutes=5)
    done = await world.commands.backfill(tenant, schedule.id, planner(middle, end),  # type: ignore[arg-type]
                                         dry_run=False, max_pending_runs=5)  # exactly full
    assert done.created == 5
    for limit, over in ((9, "max_pending_runs"), (10, None)):
        dry = await world.commands.backfill(tenant, schedule.id, planner(start, end),  # type: ignore[arg-type]
                                            dry_run=True, max_pending_runs=limit)
        assert (dry.created, dry.existing, dry.over_limit) == (0, 5, over)
    with pytest.raises(LimitExceeded) as refused:
        await world.commands.backfill(tenant, schedule.id, planner(start, end),  # type: ignore[arg-type]
                                      dry_run=False, max_pending_runs=9)
    assert refused.value.limit == "max_pending_runs"
    assert "would add 5; the limit is 9 (SCHEDULER_TENANT_MAX_PENDING_RUNS)" in str(refused.value)
    assert await world.count("pending") == 5
    # the five occurrences that have a run add nothing: 10 fits
    wider = await world.commands.backfill(tenant, schedule.id, planner(start, end),  # type: ignore[arg-type]
                                          dry_run=False, max_pending_runs=10)
    assert (wider.created, wider.existing) == (5, 5)
    with pytest.raises(LimitExceeded, match="at least 10 runs not yet ended"):
        await world.schedules.trigger(tenant, schedule.id, max_pending_runs=10)
    assert (await world.schedules.trigger(tenant, schedule.id, max_pending_runs=11)).trigger \
        is Trigger.MANUAL

    await world.set_all(status="failed")  # 11 dead letters, nothing open
    with pytest.raises(LimitExceeded, match="would add 11; the limit is 10"):
        await world.commands.replay_failed(tenant, ReplayQuery(limit=100), max_pending_runs=10)
    assert await world.count("pending") == 0
    first = (await world.keys())[0][0]
    await world.commands.replay(tenant, first, max_pending_runs=1)
    second = (await world.keys())[1][0]
    with pytest.raises(LimitExceeded, match="the limit is 1 "):
        await world.commands.replay(tenant, second, max_pending_runs=1)
    assert await world.count("pending") == 1
