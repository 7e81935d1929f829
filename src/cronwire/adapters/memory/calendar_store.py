"""MemoryCalendarStore: calendars over a :class:`MemoryDatabase`, with the rules the
Postgres store has (queries/calendar.sql): one tenant per call, unique names, the cap,
the 409 for a calendar in use, the re-plan of the schedules an edit touches."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import replace

from cronwire.adapters.memory.database import MemoryDatabase, MemorySchedule
from cronwire.adapters.memory.schedule_rows import schedule_record, unplan
from cronwire.domain.access import BY_SYSTEM, Change
from cronwire.domain.calendar_specs import (
    MAX_CALENDARS_PER_TENANT,
    CalendarRecord,
    CalendarSpec,
)
from cronwire.domain.calendars import Exclusions
from cronwire.domain.errors import LimitExceeded, NotFound, RuleViolation, StateConflict
from cronwire.domain.schedule_rules import replanned_cursor
from cronwire.domain.schedules import ScheduleSpec


def memory_exclusions(db: MemoryDatabase, tenant_id: uuid.UUID, spec: ScheduleSpec, *,
                      strict: bool = True) -> Exclusions:
    """calendar_share: the dates ``spec`` excludes; ``strict``: RuleViolation for a
    calendar the tenant does not have (the planner, not strict, leaves it out)."""
    own = [db.calendars.get(i) for i in spec.exclude_calendars]
    missing = [str(i) for i, c in zip(spec.exclude_calendars, own, strict=True)
               if c is None or c.tenant_id != tenant_id]
    if missing and strict:
        raise RuleViolation("exclude_calendars", f"no calendar {', '.join(missing)} in "
                            "this tenant (GET /v1/calendars lists them)")
    return Exclusions.of(spec.calendar_policy, ((c.spec.name, c.spec.dates) for c in own
                                                if c is not None and c.tenant_id == tenant_id))


class MemoryCalendarStore:
    def __init__(self, db: MemoryDatabase) -> None:
        self._db = db

    def _mine(self, tenant_id: uuid.UUID) -> list[CalendarRecord]:
        return [c for c in self._db.calendars.values() if c.tenant_id == tenant_id]

    def _check_name(self, tenant_id: uuid.UUID, name: str, owner: uuid.UUID | None) -> None:
        if any(c.spec.name == name and c.id != owner for c in self._mine(tenant_id)):
            raise StateConflict(f"name: {name!r} is the name of another calendar of this "
                                "tenant")

    def _users(self, tenant_id: uuid.UUID, calendar_id: uuid.UUID) -> list[MemorySchedule]:
        return sorted((s for s in self._db.schedules.values()
                       if s.tenant_id == tenant_id and s.live
                       and calendar_id in s.spec.exclude_calendars), key=lambda s: s.id)

    async def create(self, tenant_id: uuid.UUID, spec: CalendarSpec, *,
                     change: Change = BY_SYSTEM) -> CalendarRecord:
        if tenant_id not in self._db.tenants:
            raise NotFound(f"tenant {tenant_id} not found")
        count = len(self._mine(tenant_id))
        if count >= MAX_CALENDARS_PER_TENANT:
            raise LimitExceeded("max_calendars", None, f"this tenant already has {count} "
                                f"calendars (limit {MAX_CALENDARS_PER_TENANT})")
        self._check_name(tenant_id, spec.name, None)
        now = self._db.now()
        record = CalendarRecord(uuid.uuid4(), tenant_id, spec, now, now)
        self._db.calendars[record.id] = record
        return record

    async def list(self, tenant_id: uuid.UUID) -> Sequence[CalendarRecord]:
        return sorted(self._mine(tenant_id), key=lambda c: c.spec.name)

    async def get(self, tenant_id: uuid.UUID, calendar_id: uuid.UUID) -> CalendarRecord:
        found = self._db.calendars.get(calendar_id)
        if found is None or found.tenant_id != tenant_id:
            raise NotFound(f"calendar {calendar_id} not found")
        return found

    async def update(self, tenant_id: uuid.UUID, calendar_id: uuid.UUID,
                     revise: Callable[[CalendarSpec], CalendarSpec], *,
                     change: Change = BY_SYSTEM) -> tuple[CalendarRecord, int]:
        current = await self.get(tenant_id, calendar_id)
        spec = revise(current.spec)
        self._check_name(tenant_id, spec.name, calendar_id)
        updated = replace(current, spec=spec, updated_at=self._db.now())
        self._db.calendars[calendar_id] = updated
        replanned = 0
        if spec.dates != current.spec.dates:
            for schedule in self._users(tenant_id, calendar_id):
                replanned += self._replan(schedule)
        return updated, replanned

    def _replan(self, schedule: MemorySchedule) -> int:
        now = self._db.now()
        taken = unplan(self._db, schedule.id, now)
        if taken is not None:
            schedule.last_fire_at = taken[1]
        exclusions = memory_exclusions(self._db, schedule.tenant_id, schedule.spec)
        schedule.next_fire_at = replanned_cursor(schedule_record(schedule), exclusions,
                                                 schedule.last_fire_at, now)
        return 1

    async def delete(self, tenant_id: uuid.UUID, calendar_id: uuid.UUID, *,
                     change: Change = BY_SYSTEM) -> None:
        current = await self.get(tenant_id, calendar_id)
        users = self._users(tenant_id, calendar_id)
        if users:
            shown = ", ".join(f"{s.spec.name!r} ({s.id})" for s in users[:10])
            raise StateConflict(f"calendar {current.spec.name!r} is excluded by schedules "
                                f"{shown}; remove it from their exclude_calendars first")
        del self._db.calendars[calendar_id]

    async def exclusions(self, tenant_id: uuid.UUID, spec: ScheduleSpec) -> Exclusions:
        return memory_exclusions(self._db, tenant_id, spec)
