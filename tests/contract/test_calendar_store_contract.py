"""The CalendarStore contract, against PostgresCalendarStore and the in-memory fake (ADR
0064): tenant confinement, unique names, the per-tenant cap, a schedule may exclude only
its own tenant's calendars, a calendar in use cannot be deleted, and an edit re-plans the
runs not yet due of the schedules that exclude it."""

from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import UTC, date, timedelta

import pytest

from cronwire.domain.calendar_specs import MAX_CALENDARS_PER_TENANT, CalendarSpec
from cronwire.domain.calendars import CalendarPolicy
from cronwire.domain.errors import LimitExceeded, NotFound, RuleViolation, StateConflict
from cronwire.domain.model import Target, run_id_for
from cronwire.domain.planning import decide
from cronwire.domain.schedules import ScheduleSpec
from tests.support.worlds import STORES, URL, World, world_for

SECRET = "whsec_" + "C" * 32
DAILY = ScheduleSpec(name="daily", cron="0 9 * * *", target=Target(url=URL))
THREE_DAYS = 3 * 86_400.0


@pytest.fixture(params=STORES)
def world(request: pytest.FixtureRequest) -> World:
    return world_for(request)


async def _tenant(world: World) -> uuid.UUID:
    return (await world.seed(0)).tenant_id


async def _schedule(world: World, tenant: uuid.UUID, spec: ScheduleSpec) -> uuid.UUID:
    return (await world.schedules.create(tenant, spec, paused=False, signing_secret=SECRET,
                                         max_schedules=10)).id


async def test_create_get_list_and_unique_names(world: World) -> None:
    tenant = await _tenant(world)
    made = await world.calendars.create(tenant, CalendarSpec("b", (date(2026, 12, 25),)))
    other = await world.calendars.create(tenant, CalendarSpec("a", ()))
    assert await world.calendars.get(tenant, made.id) == made
    assert [c.spec.name for c in await world.calendars.list(tenant)] == ["a", "b"]
    with pytest.raises(StateConflict, match="name"):
        await world.calendars.create(tenant, CalendarSpec("b", ()))
    with pytest.raises(StateConflict, match="name"):
        await world.calendars.update(tenant, other.id, lambda s: replace(s, name="b"))


async def test_another_tenants_calendar_reads_as_missing(world: World) -> None:
    tenant, stranger = await _tenant(world), await _tenant(world)
    made = await world.calendars.create(tenant, CalendarSpec("mine", (date(2026, 12, 25),)))
    for call in (world.calendars.get(stranger, made.id),
                 world.calendars.update(stranger, made.id, lambda s: s),
                 world.calendars.delete(stranger, made.id)):
        with pytest.raises(NotFound):
            await call
    assert await world.calendars.list(stranger) == []
    # ... and a schedule of the stranger's cannot exclude it (a 422 naming the field).
    with pytest.raises(RuleViolation) as refused:
        await _schedule(world, stranger, replace(DAILY, exclude_calendars=(made.id,)))
    assert refused.value.field == "exclude_calendars"
    with pytest.raises(RuleViolation):
        await world.calendars.exclusions(stranger, replace(DAILY, exclude_calendars=(made.id,)))


async def test_a_tenant_keeps_at_most_its_cap(world: World) -> None:
    tenant = await _tenant(world)
    for i in range(MAX_CALENDARS_PER_TENANT):
        await world.calendars.create(tenant, CalendarSpec(f"c{i:03}", ()))
    with pytest.raises(LimitExceeded) as refused:
        await world.calendars.create(tenant, CalendarSpec("one-more", ()))
    assert refused.value.limit == "max_calendars"
    # Another tenant's calendars are its own business.
    await world.calendars.create(await _tenant(world), CalendarSpec("c000", ()))


async def test_the_first_fire_of_a_schedule_follows_its_calendar(world: World) -> None:
    tenant = await _tenant(world)
    plain = await world.schedules.get(tenant, await _schedule(world, tenant, DAILY))
    assert plain.next_fire_at is not None
    first_day = plain.next_fire_at.astimezone(UTC).date()
    calendar = await world.calendars.create(tenant, CalendarSpec("off", (first_day,)))
    shifted = await world.schedules.get(tenant, await _schedule(world, tenant, replace(
        DAILY, name="shifted", exclude_calendars=(calendar.id,),
        calendar_policy=CalendarPolicy.NEXT_BUSINESS_DAY)))
    # The excluded day's 09:00 moves to the next business day; the day after fires
    # anyway (a business day, or a weekend day no calendar lists): 09:00 the next day.
    assert shifted.next_fire_at == plain.next_fire_at + timedelta(days=1)
    assert shifted.spec.exclude_calendars == (calendar.id,)
    assert shifted.spec.calendar_policy is CalendarPolicy.NEXT_BUSINESS_DAY


async def test_a_calendar_in_use_cannot_be_deleted(world: World) -> None:
    tenant = await _tenant(world)
    calendar = await world.calendars.create(tenant, CalendarSpec("off", (date(2030, 1, 1),)))
    schedule = await _schedule(world, tenant, replace(DAILY, exclude_calendars=(calendar.id,)))
    with pytest.raises(StateConflict, match="daily"):
        await world.calendars.delete(tenant, calendar.id)
    await world.schedules.delete(tenant, schedule)
    await world.calendars.delete(tenant, calendar.id)
    with pytest.raises(NotFound):
        await world.calendars.get(tenant, calendar.id)


async def test_an_edit_replans_the_runs_not_yet_due(world: World) -> None:
    tenant = await _tenant(world)
    calendar = await world.calendars.create(tenant, CalendarSpec("off", (date(2030, 1, 1),)))
    schedule = await _schedule(world, tenant, replace(DAILY, exclude_calendars=(calendar.id,)))

    async def plan() -> None:
        await world.planner.plan_due(limit=10, lookahead_seconds=THREE_DAYS,
                                     decide=lambda s, n, w: decide(s, n, w, THREE_DAYS))

    await plan()
    ahead = await world.pending_of(schedule)
    assert len(ahead) == 3
    excluded = ahead[1].astimezone(UTC).date()
    edited, replanned = await world.calendars.update(
        tenant, calendar.id, lambda s: replace(s, dates=(excluded,)))
    assert replanned == 1 and edited.spec.dates == (excluded,)
    assert await world.pending_of(schedule) == []  # taken back: none was due yet
    await plan()
    assert await world.pending_of(schedule) == [ahead[0], ahead[2]]
    assert await world.skip_reason(run_id_for(schedule, ahead[1])) == "calendar"
    # A rename changes no date: nothing is re-planned.
    _, again = await world.calendars.update(tenant, calendar.id, lambda s: replace(s, name="x"))
    assert again == 0
