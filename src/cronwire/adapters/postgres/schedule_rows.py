"""A schedule row as the schedule store and its neighbours read and write it: the row as
a record, a missing row as NotFound, a taken key as 409, and taking back the occurrences
planned ahead (queries/schedule.sql, job_run.sql)."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from datetime import datetime

import asyncpg

from cronwire.adapters.postgres.sql import queries
from cronwire.domain.alerts import AlertRules
from cronwire.domain.calendars import CalendarPolicy
from cronwire.domain.documents import retry_from_document, target_from_document
from cronwire.domain.errors import NotFound, StateConflict
from cronwire.domain.flow_control import flow_from_document
from cronwire.domain.model import MisfirePolicy, OverlapPolicy, ScheduleStatus
from cronwire.domain.rrules import is_rrule
from cronwire.domain.schedules import ScheduleRecord, ScheduleSpec

Q = queries()


async def unplan(
    conn: asyncpg.Connection, tenant_id: uuid.UUID, schedule_id: uuid.UUID
) -> tuple[datetime, datetime | None] | None:
    """Take back the occurrences written ahead (job_run_unplan_ahead): the first one taken
    back and the last occurrence still written before it, or None if there were none."""
    taken = await conn.fetch(Q["job_run_unplan_ahead"], tenant_id, schedule_id)
    if not taken:
        return None
    first: datetime = min(r["scheduled_for"] for r in taken)
    last: datetime | None = await conn.fetchval(
        Q["job_run_last_occurrence_before"], tenant_id, schedule_id, first)
    return first, last


async def unplan_ahead(
    conn: asyncpg.Connection, tenant_id: uuid.UUID, schedule_id: uuid.UUID,
) -> asyncpg.Record | None:
    """A pause's tidy-up, in the caller's transaction after the status changed: take back
    the occurrences written ahead and rewind the cursor to the first of them
    (schedule_rewind). Returns the rewound row, or None if nothing was written ahead."""
    taken = await unplan(conn, tenant_id, schedule_id)
    if taken is None:
        return None
    row: asyncpg.Record | None = await conn.fetchrow(Q["schedule_rewind"], tenant_id,
                                                       schedule_id, *taken)
    return row


def _is_rule(timetable: str | None) -> bool:
    return timetable is not None and is_rrule(timetable)


def schedule_record(row: asyncpg.Record) -> ScheduleRecord:
    spec = ScheduleSpec(
        name=row["name"],
        # The cron column holds the timetable: a cron expression or an RFC 5545 rule.
        cron=None if _is_rule(row["cron"]) else row["cron"],
        rrule=row["cron"] if _is_rule(row["cron"]) else None,
        timezone=row["timezone"],
        target=target_from_document(row["target"]),
        retry=retry_from_document(row["retry"]),
        misfire_policy=MisfirePolicy(row["misfire_policy"]),
        catchup_window_seconds=row["catchup_window_seconds"],
        starts_at=row["starts_at"],
        ends_at=row["ends_at"],
        at=row["run_at"],
        overlap_policy=OverlapPolicy(row["overlap_policy"]),
        jitter_seconds=row["jitter_seconds"],
        max_runs=row["max_runs"],
        pause_after_failures=row["pause_after_failures"],
        alerts=AlertRules(row["alert_after_failures"], row["alert_late_after_seconds"],
                          row["alert_max_duration_ms"]),
        flow_control=flow_from_document(row["flow_control"]),
        key=row.get("key"), managed_by=row.get("managed_by"),
        exclude_calendars=tuple(row.get("exclude_calendars") or ()),
        calendar_policy=CalendarPolicy(row.get("calendar_policy") or "skip"),
    )
    return ScheduleRecord(
        id=row["id"], tenant_id=row["tenant_id"], spec=spec,
        status=ScheduleStatus(row["status"]), next_fire_at=row["next_fire_at"],
        last_fire_at=row["last_fire_at"], created_at=row["created_at"],
        updated_at=row["updated_at"],
        previous_secret_expires_at=row["previous_secret_expires_at"],
        signing_secret=row["signing_secret"], runs_planned=row["runs_planned"],
        consecutive_failures=row["consecutive_failures"],
        paused_reason=row["paused_reason"], paused_at=row["paused_at"],
        version=row.get("version", 1),
    )


KEY_INDEX = "schedule_tenant_key_idx"


@contextlib.contextmanager
def key_conflicts(key: str | None) -> Iterator[None]:
    """A write that would give a second live schedule of the tenant this key: 409."""
    try:
        yield
    except asyncpg.UniqueViolationError as exc:
        if exc.constraint_name != KEY_INDEX:
            raise
        raise StateConflict(f"key: {key!r} is the key of another schedule of this tenant; "
                            "keys are unique among live schedules") from None


def found_row(row: asyncpg.Record | None, object_id: uuid.UUID,
           kind: str = "schedule") -> asyncpg.Record:
    if row is None:
        raise NotFound(f"{kind} {object_id} not found")
    return row
