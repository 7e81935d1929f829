"""The calendar use cases (ADR 0064): validate (generating the dates of a holidays source
off the event loop), then write through the store, which re-plans the schedules an edit
touches."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from datetime import datetime
from functools import partial

from cronwire.domain.access import BY_SYSTEM, Change
from cronwire.domain.calendar_specs import CalendarRecord, CalendarSpec, validated
from cronwire.domain.calendar_walk import annotated
from cronwire.domain.calendars import NO_EXCLUSIONS, Exclusions, Verdict
from cronwire.domain.schedule_rules import preview
from cronwire.domain.schedules import ScheduleRecord
from cronwire.ports import CalendarStore, CpuWork, OnTheLoop, ScheduleStore

CalendarEdit = Callable[[CalendarSpec], CalendarSpec]


async def create_calendar(store: CalendarStore, tenant: uuid.UUID, spec: CalendarSpec, *,
                          cpu: CpuWork | None = None,
                          change: Change = BY_SYSTEM) -> CalendarRecord:
    valid = await (cpu or OnTheLoop()).run(partial(validated, spec))
    return await store.create(tenant, valid, change=change)


async def update_calendar(store: CalendarStore, tenant: uuid.UUID, calendar_id: uuid.UUID,
                          edit: CalendarEdit, *, cpu: CpuWork | None = None,
                          change: Change = BY_SYSTEM) -> tuple[CalendarRecord, int]:
    """The edited calendar and how many schedules it re-planned. A holidays source is
    expanded before the store locks anything (the expansion runs in ``cpu``); the store
    applies the result under its locks."""
    current = await store.get(tenant, calendar_id)
    wanted = edit(current.spec)
    valid = await (cpu or OnTheLoop()).run(partial(validated, wanted, current.spec))
    return await store.update(tenant, calendar_id, lambda _locked: valid, change=change)


async def list_calendars(store: CalendarStore, tenant: uuid.UUID) -> Sequence[CalendarRecord]:
    return await store.list(tenant)


async def get_calendar(store: CalendarStore, tenant: uuid.UUID,
                       calendar_id: uuid.UUID) -> CalendarRecord:
    return await store.get(tenant, calendar_id)


async def delete_calendar(store: CalendarStore, tenant: uuid.UUID, calendar_id: uuid.UUID, *,
                          change: Change = BY_SYSTEM) -> None:
    await store.delete(tenant, calendar_id, change=change)


async def exclusions_of(schedules: ScheduleStore, calendars: CalendarStore | None,
                        tenant: uuid.UUID, schedule_id: uuid.UUID) -> Exclusions:
    """The dates the schedule's calendars exclude now (none without calendars)."""
    spec = (await schedules.get(tenant, schedule_id)).spec
    if calendars is None or not spec.exclude_calendars:
        return NO_EXCLUSIONS
    return await calendars.exclusions(tenant, spec)


async def preview_with_calendars(
    schedules: ScheduleStore, calendars: CalendarStore | None, tenant: uuid.UUID,
    schedule_id: uuid.UUID, count: int, cpu: CpuWork | None = None,
) -> tuple[ScheduleRecord, datetime, list[Verdict]]:
    """The schedule, the database's now and its next ``count`` effective instants, each
    with what its calendars made of it (fired as planned, shifted from an excluded date,
    or skipped)."""
    record = await schedules.get(tenant, schedule_id)
    now = await schedules.db_now()
    spec = record.spec
    exclusions = None
    if calendars is not None and spec.exclude_calendars:
        exclusions = await calendars.exclusions(tenant, spec)

    def walk() -> list[Verdict]:
        if exclusions is None:
            return [Verdict(t) for t in preview(spec, now, count)]
        fires = preview(spec, now, count, exclusions)
        return annotated(spec.timetable or "", spec.timezone, fires, exclusions)

    return record, now, await (cpu or OnTheLoop()).run(walk)
