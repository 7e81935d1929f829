"""CalendarStore on Postgres (queries/calendar.sql): a tenant's calendars, the dates a
schedule's write excludes, and the re-plan of the schedules a calendar's edit touches.

Locks are always taken schedules first, then calendars: a calendar's edit or delete
locks the schedules that exclude it (schedule_lock_by_calendar) before its own row, and
a schedule's write holds its row when it reads its calendars FOR SHARE (exclusions_on).
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable, Iterator, Sequence

import asyncpg

from cronwire.adapters.postgres.audit_log import write_audit
from cronwire.adapters.postgres.driver_errors import storage_errors
from cronwire.adapters.postgres.schedule_rows import found_row, schedule_record, unplan
from cronwire.adapters.postgres.sql import queries
from cronwire.domain.access import BY_SYSTEM, Change
from cronwire.domain.audit import AuditEntry, diff
from cronwire.domain.calendar_specs import (
    MAX_CALENDARS_PER_TENANT,
    CalendarRecord,
    CalendarSpec,
    HolidaySource,
    calendar_fields,
)
from cronwire.domain.calendars import CalendarPolicy, Exclusions
from cronwire.domain.errors import LimitExceeded, RuleViolation, StateConflict
from cronwire.domain.schedule_rules import replanned_cursor
from cronwire.domain.schedules import ScheduleSpec

Q = queries()
NAME_INDEX = "calendar_tenant_name_idx"


def calendar_record(row: asyncpg.Record) -> CalendarRecord:
    spec = CalendarSpec(row["name"], tuple(row["dates"]),
                        HolidaySource.from_document(row["holidays"]))
    return CalendarRecord(row["id"], row["tenant_id"], spec, row["created_at"],
                          row["updated_at"])


@contextlib.contextmanager
def name_conflicts(name: str) -> Iterator[None]:
    try:
        yield
    except asyncpg.UniqueViolationError as exc:
        if exc.constraint_name != NAME_INDEX:
            raise
        raise StateConflict(f"name: {name!r} is the name of another calendar of this "
                            "tenant") from None


def exclusions_from(rows: Sequence[asyncpg.Record], ids: Sequence[uuid.UUID],
                    policy: CalendarPolicy) -> Exclusions:
    """The dates of ``rows`` in the order of ``ids``; RuleViolation naming
    ``exclude_calendars`` for an id with no row (missing, deleted or another tenant's)."""
    by_id = {row["id"]: row for row in rows}
    missing = [str(i) for i in ids if i not in by_id]
    if missing:
        raise RuleViolation("exclude_calendars", f"no calendar {', '.join(missing)} in "
                            "this tenant (GET /v1/calendars lists them)")
    return Exclusions.of(policy, ((by_id[i]["name"], by_id[i]["dates"]) for i in ids))


async def exclusions_on(conn: asyncpg.Connection, tenant_id: uuid.UUID,
                        spec: ScheduleSpec) -> Exclusions:
    """The dates ``spec`` excludes, its calendars held FOR SHARE until the caller's
    transaction ends (a concurrent delete waits, then finds the reference)."""
    if not spec.exclude_calendars:
        return Exclusions(spec.calendar_policy)
    ids = list(spec.exclude_calendars)
    rows = await conn.fetch(Q["calendar_share"], tenant_id, ids)
    return exclusions_from(rows, ids, spec.calendar_policy)


async def _audit(conn: asyncpg.Connection, tenant_id: uuid.UUID, change: Change, action: str,
                 calendar_id: uuid.UUID, before: CalendarSpec | None,
                 after: CalendarSpec | None) -> None:
    changes = diff(calendar_fields(before), calendar_fields(after))
    await write_audit(conn, tenant_id, AuditEntry(change, action, "calendar", str(calendar_id),
                                                  changes))


class PostgresCalendarStore:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def create(self, tenant_id: uuid.UUID, spec: CalendarSpec, *,
                     change: Change = BY_SYSTEM) -> CalendarRecord:
        with storage_errors("creating a calendar"), name_conflicts(spec.name):
            async with self._pool.acquire() as conn, conn.transaction():
                tenant = found_row(await conn.fetchrow(Q["calendar_lock_tenant_count"],
                                                       tenant_id), tenant_id, "tenant")
                if tenant["calendars"] >= MAX_CALENDARS_PER_TENANT:
                    raise LimitExceeded("max_calendars", None,
                                        f"this tenant already has {tenant['calendars']} "
                                        f"calendars (limit {MAX_CALENDARS_PER_TENANT})")
                row = await conn.fetchrow(Q["calendar_insert"], uuid.uuid4(), tenant_id,
                                          spec.name, list(spec.dates), _source(spec))
                await _audit(conn, tenant_id, change, "calendar.create", row["id"], None, spec)
        return calendar_record(row)

    async def list(self, tenant_id: uuid.UUID) -> Sequence[CalendarRecord]:
        with storage_errors("listing calendars"):
            rows = await self._pool.fetch(Q["calendar_list"], tenant_id,
                                          MAX_CALENDARS_PER_TENANT)
        return [calendar_record(row) for row in rows]

    async def get(self, tenant_id: uuid.UUID, calendar_id: uuid.UUID) -> CalendarRecord:
        with storage_errors(f"reading calendar {calendar_id}"):
            row = await self._pool.fetchrow(Q["calendar_get"], tenant_id, calendar_id)
        return calendar_record(found_row(row, calendar_id, "calendar"))

    async def update(self, tenant_id: uuid.UUID, calendar_id: uuid.UUID,
                     revise: Callable[[CalendarSpec], CalendarSpec], *,
                     change: Change = BY_SYSTEM) -> tuple[CalendarRecord, int]:
        with storage_errors(f"updating calendar {calendar_id}"), contextlib.ExitStack() as names:
            async with self._pool.acquire() as conn, conn.transaction():
                users = await conn.fetch(Q["schedule_lock_by_calendar"], tenant_id, calendar_id)
                locked = found_row(await conn.fetchrow(Q["calendar_lock"], tenant_id,
                                                       calendar_id), calendar_id, "calendar")
                before = calendar_record(locked).spec
                spec = revise(before)  # a domain error here rolls the locks back
                names.enter_context(name_conflicts(spec.name))
                row = await conn.fetchrow(Q["calendar_update"], tenant_id, calendar_id,
                                          spec.name, list(spec.dates), _source(spec))
                await _audit(conn, tenant_id, change, "calendar.update", calendar_id, before,
                             spec)
                replanned = 0
                if spec.dates != before.dates:
                    for user in users:
                        replanned += await _replan(conn, tenant_id, user)
        return calendar_record(row), replanned

    async def delete(self, tenant_id: uuid.UUID, calendar_id: uuid.UUID, *,
                     change: Change = BY_SYSTEM) -> None:
        with storage_errors(f"deleting calendar {calendar_id}"):
            async with self._pool.acquire() as conn, conn.transaction():
                users = await conn.fetch(Q["schedule_lock_by_calendar"], tenant_id, calendar_id)
                locked = found_row(await conn.fetchrow(Q["calendar_lock"], tenant_id,
                                                       calendar_id), calendar_id, "calendar")
                if users:
                    raise StateConflict(_in_use(locked["name"], users))
                await conn.execute(Q["calendar_delete"], tenant_id, calendar_id)
                await _audit(conn, tenant_id, change, "calendar.delete", calendar_id,
                             calendar_record(locked).spec, None)

    async def exclusions(self, tenant_id: uuid.UUID, spec: ScheduleSpec) -> Exclusions:
        if not spec.exclude_calendars:
            return Exclusions(spec.calendar_policy)
        ids = list(spec.exclude_calendars)
        with storage_errors("reading a schedule's calendars"):
            rows = await self._pool.fetch(Q["calendar_read_for"], tenant_id, ids)
        return exclusions_from(rows, ids, spec.calendar_policy)


def _source(spec: CalendarSpec) -> dict[str, object] | None:
    return spec.holidays.to_document() if spec.holidays else None


def _in_use(name: str, users: Sequence[asyncpg.Record]) -> str:
    shown = ", ".join(f"{u['name']!r} ({u['id']})" for u in users[:10])
    more = f" and {len(users) - 10} more" if len(users) > 10 else ""
    return (f"calendar {name!r} is excluded by schedules {shown}{more}; remove it from "
            "their exclude_calendars first")


async def _replan(conn: asyncpg.Connection, tenant_id: uuid.UUID, row: asyncpg.Record) -> int:
    """Take back what ``row``'s schedule planned ahead on the old dates and move its
    cursor on the new ones (the same rule as an edit of its timing). Returns 1: one
    schedule planned again (written only where something moved)."""
    record = schedule_record(row)
    exclusions = await exclusions_on(conn, tenant_id, record.spec)
    taken = await unplan(conn, tenant_id, record.id)
    last_fire_at = record.last_fire_at if taken is None else taken[1]
    cursor = replanned_cursor(record, exclusions, last_fire_at, row["db_now"])
    if cursor == record.next_fire_at and taken is None:
        return 1
    await conn.execute(Q["schedule_replan"], tenant_id, record.id, cursor, last_fire_at)
    return 1
