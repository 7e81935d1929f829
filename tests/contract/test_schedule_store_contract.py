"""The ScheduleStore contract, against PostgresScheduleStore and the in-memory fake:
tenant confinement, the quota, fire times on the store's clock, delete and trigger."""

from __future__ import annotations

import asyncio
import dataclasses
import time
import uuid
from datetime import timedelta

import pytest

from cronwire.adapters.metrics import PrometheusMetrics
from cronwire.domain.errors import LimitExceeded, NotFound
from cronwire.domain.model import RunStatus, ScheduleStatus, Target, Trigger
from cronwire.domain.schedules import ScheduleSpec, TenantLimits
from cronwire.service.planner import Planner, TickResult
from tests.support.worlds import STORES, URL, World, world_for

SPEC = ScheduleSpec(name="hourly", cron="0 * * * *", target=Target(url=URL))
SECRET = "whsec_" + "B" * 32
DEFAULTS = TenantLimits(max_schedules=10, min_interval_seconds=60, max_body_bytes=1024,
                        max_headers=10)


@pytest.fixture(params=STORES)
def world(request: pytest.FixtureRequest) -> World:
    return world_for(request)


async def test_create_plans_the_first_fire_on_the_store_clock(world: World) -> None:
    tenant = (await world.seed(0)).tenant_id
    limits, now = await world.schedules.limits_and_now(tenant, DEFAULTS)
    assert limits == DEFAULTS
    made = await world.schedules.create(tenant, SPEC, paused=False, signing_secret=SECRET,
                                        max_schedules=10)
    assert made.status is ScheduleStatus.ACTIVE and made.spec == SPEC
    assert made.next_fire_at is not None and 0 < (made.next_fire_at - now).total_seconds() <= 3600
    assert made.next_fire_at.minute == 0 and made.next_fire_at.second == 0
    assert await world.schedules.get(tenant, made.id) == made


async def test_another_tenants_schedule_reads_as_missing(world: World) -> None:
    tenant = (await world.seed(0)).tenant_id
    stranger = (await world.seed(0)).tenant_id
    made = await world.schedules.create(tenant, SPEC, paused=True, signing_secret=SECRET,
                                        max_schedules=10)
    for call in (
        world.schedules.get(stranger, made.id),
        world.schedules.set_paused(stranger, made.id, False),
        world.schedules.delete(stranger, made.id),
        world.schedules.trigger(stranger, made.id, max_pending_runs=10),
        world.schedules.get(tenant, uuid.uuid4()),
    ):
        with pytest.raises(NotFound):
            await call
    assert made.id not in {s.id for s in await world.schedules.list(stranger, after=None, limit=50)}


async def test_the_quota_counts_live_schedules(world: World) -> None:
    tenant = (await world.seed(0)).tenant_id  # one seeded schedule already
    await world.schedules.create(tenant, SPEC, paused=False, signing_secret=SECRET,
                                 max_schedules=2)
    with pytest.raises(LimitExceeded):
        await world.schedules.create(tenant, SPEC, paused=False, signing_secret=SECRET,
                                     max_schedules=2)


async def test_list_pages_by_id(world: World) -> None:
    tenant = (await world.seed(0)).tenant_id
    for _ in range(3):
        await world.schedules.create(tenant, SPEC, paused=False, signing_secret=SECRET,
                                     max_schedules=10)
    first = await world.schedules.list(tenant, after=None, limit=2)
    rest = await world.schedules.list(tenant, after=first[-1].id, limit=10)
    ids = [s.id for s in (*first, *rest)]
    assert len(ids) == 4 and ids == sorted(ids)


async def test_an_edit_of_the_timing_moves_the_next_fire(world: World) -> None:
    tenant = (await world.seed(0)).tenant_id
    made = await world.schedules.create(tenant, SPEC, paused=False, signing_secret=SECRET,
                                        max_schedules=10)
    renamed = await world.schedules.update(
        tenant, made.id, lambda spec: spec.with_changes({"name": "renamed"}))
    assert renamed.spec.name == "renamed" and renamed.next_fire_at == made.next_fire_at
    daily = await world.schedules.update(
        tenant, made.id, lambda spec: spec.with_changes({"cron": "0 0 * * *"}))
    assert daily.next_fire_at is not None and daily.next_fire_at.hour == 0


async def test_pause_rotate_and_trigger(world: World) -> None:
    tenant = (await world.seed(0)).tenant_id
    made = await world.schedules.create(tenant, SPEC, paused=False, signing_secret=SECRET,
                                        max_schedules=10)
    paused = await world.schedules.set_paused(tenant, made.id, True)
    assert paused.status is ScheduleStatus.PAUSED and paused.next_fire_at == made.next_fire_at
    rotated = await world.schedules.rotate_secret(tenant, made.id, "whsec_" + "C" * 32, 600)
    assert rotated.signing_secret == "whsec_" + "C" * 32
    assert rotated.previous_secret_expires_at is not None
    run = await world.schedules.trigger(tenant, made.id, max_pending_runs=10)
    assert run.trigger is Trigger.MANUAL and run.status is RunStatus.PENDING
    assert run.scheduled_for.microsecond != 0 or run.scheduled_for.second != 0
    assert run.fire_after == run.scheduled_for


async def test_delete_cancels_waiting_runs_and_hides_the_schedule(world: World) -> None:
    schedule = await world.seed(3)
    assert await world.schedules.delete(schedule.tenant_id, schedule.id) == 3
    assert {r.status for r in await world.rows()} == {"cancelled"}
    with pytest.raises(NotFound):
        await world.schedules.get(schedule.tenant_id, schedule.id)
    with pytest.raises(NotFound):
        await world.schedules.delete(schedule.tenant_id, schedule.id)


EVERY_MINUTE = ScheduleSpec(name="minutely", cron="* * * * *", target=Target(url=URL))


async def _plan_everything(world: World) -> TickResult:
    """One look-ahead tick and one early tick (what an idle planner does each interval);
    the early tick's result."""
    planner = Planner(world.planner, PrometheusMetrics(), batch=50, tick_seconds=1,
                      lookahead_seconds=5)
    await planner.tick()
    return await planner.tick(ahead=True)


async def _clear_of_a_minute_boundary() -> None:
    """Out of the last 15 s of a minute: a minutely schedule made within 5 s of the minute
    has its first fire inside the 5 s look-ahead, which writes it, and the early pass then
    writes the next minute's too (two pending runs, rightly); 10 s more for a slow test."""
    second = time.time() % 60
    if second > 45:
        await asyncio.sleep(60.5 - second)


async def test_the_idle_planner_writes_a_schedules_next_minute_fire_ahead(world: World) -> None:
    tenant = (await world.seed(0)).tenant_id
    await _clear_of_a_minute_boundary()
    made = await world.schedules.create(tenant, EVERY_MINUTE, paused=False,
                                        signing_secret=SECRET, max_schedules=10)
    await _plan_everything(world)
    assert await world.pending_of(made.id) == [made.next_fire_at]
    moved = await world.schedules.get(tenant, made.id)
    assert moved.last_fire_at == made.next_fire_at and moved.next_fire_at is not None
    assert (moved.next_fire_at - made.next_fire_at).total_seconds() == 60


async def test_a_pause_takes_back_what_was_written_ahead_and_a_resume_writes_it_again(
    world: World,
) -> None:
    tenant = (await world.seed(0)).tenant_id
    await _clear_of_a_minute_boundary()
    made = await world.schedules.create(tenant, EVERY_MINUTE, paused=False,
                                        signing_secret=SECRET, max_schedules=10)
    await _plan_everything(world)
    assert await world.pending_of(made.id) == [made.next_fire_at]
    paused = await world.schedules.set_paused(tenant, made.id, True)
    assert await world.pending_of(made.id) == []  # a paused schedule fires nothing more
    assert paused.next_fire_at == made.next_fire_at and paused.last_fire_at is None
    await world.schedules.set_paused(tenant, made.id, False)
    await _plan_everything(world)
    assert await world.pending_of(made.id) == [made.next_fire_at]


async def test_a_timing_edit_takes_back_the_old_timetables_fire(world: World) -> None:
    tenant = (await world.seed(0)).tenant_id
    made = await world.schedules.create(tenant, EVERY_MINUTE, paused=False,
                                        signing_secret=SECRET, max_schedules=10)
    await _plan_everything(world)
    edited = await world.schedules.update(
        tenant, made.id, lambda spec: dataclasses.replace(spec, cron="0 0 * * *"))
    assert await world.pending_of(made.id) == []
    assert edited.last_fire_at is None and edited.next_fire_at is not None
    assert (edited.next_fire_at.hour, edited.next_fire_at.minute) == (0, 0)


EVERY_TEN_SECONDS = ScheduleSpec(name="frequent", cron="*/10 * * * * *", target=Target(url=URL))


async def test_a_new_frequent_schedule_gets_nothing_written_past_the_look_ahead(
    world: World,
) -> None:
    """Found by a first user: a new `*/10 * * * * *` schedule whose first fire lay past the look-ahead
    was admitted by the early pass (it never fired, so no interval was known) and got a
    whole minute of runs at once. Its first fire is put 20-30 s out with starts_at."""
    tenant = (await world.seed(0)).tenant_id
    _, now = await world.schedules.limits_and_now(tenant, DEFAULTS)
    spec = dataclasses.replace(EVERY_TEN_SECONDS, starts_at=now + timedelta(seconds=20))
    made = await world.schedules.create(tenant, spec, paused=False, signing_secret=SECRET,
                                        max_schedules=10)
    assert made.next_fire_at is not None and made.next_fire_at > now + timedelta(seconds=5)
    early = await _plan_everything(world)
    assert await world.pending_of(made.id) == []  # left to the look-ahead
    # Passed over, so not counted: a batch of such schedules is not "full, tick again".
    assert early.schedules == 0
    unchanged = await world.schedules.get(tenant, made.id)
    assert unchanged.next_fire_at == made.next_fire_at and unchanged.last_fire_at is None


async def test_the_early_pass_leaves_a_pair_of_close_fires_to_the_look_ahead(world: World) -> None:
    """A daily schedule that fires twice within ten seconds passes the early pass's
    interval filter (its last fire was a day ago) but its pair is frequent: only the
    look-ahead may write it."""
    tenant = (await world.seed(0)).tenant_id
    _, now = await world.schedules.limits_and_now(tenant, DEFAULTS)
    first = (now + timedelta(seconds=30)).replace(microsecond=0)
    cron = f"{first.second},{(first.second + 5) % 60} {first.minute} {first.hour} * * *"
    if first.second + 5 >= 60:  # the pair would straddle a minute: use the next whole one
        first = first.replace(second=0) + timedelta(minutes=1)
        cron = f"0,5 {first.minute} {first.hour} * * *"
    made = await world.schedules.create(
        tenant, ScheduleSpec(name="pair", cron=cron, target=Target(url=URL)), paused=False,
        signing_secret=SECRET, max_schedules=10)
    await _plan_everything(world)
    assert await world.pending_of(made.id) == []
