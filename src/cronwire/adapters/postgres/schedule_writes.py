"""What a change to one schedule writes inside a transaction the store opened and locked
for it: the row (header values and secrets sealed), the planner's cursor, the
flow-control sync, and the version, revision and audit row (schedule_changes). The
store's create, update, pause/resume and delete each run one of these; an apply runs
many in one transaction (schedule_apply.write_plan)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime

import asyncpg

from cronwire.adapters.postgres.calendar_store import exclusions_on
from cronwire.adapters.postgres.flow_store import resync_deleted, save_flow_control
from cronwire.adapters.postgres.schedule_changes import audit_schedule, record_change
from cronwire.adapters.postgres.schedule_columns import (
    alert_columns,
    identity_columns,
    semantics_columns,
    spec_columns,
)
from cronwire.adapters.postgres.schedule_rows import (
    found_row,
    key_conflicts,
    schedule_record,
    unplan,
    unplan_ahead,
)
from cronwire.adapters.postgres.sealed_fields import opened_record, sealed_secret
from cronwire.adapters.postgres.sql import queries, rows_affected
from cronwire.domain.access import BY_SYSTEM, Change
from cronwire.domain.model import ScheduleStatus
from cronwire.domain.schedule_rules import first_fire, rescheduled_next_fire, status_after_edit
from cronwire.domain.schedules import ScheduleRecord, ScheduleSpec
from cronwire.ports.secrets import SecretBox

Q = queries()


class ScheduleRowWriter:
    """One schedule's writes on the caller's connection and transaction."""

    def __init__(self, box: SecretBox) -> None:
        self._box = box

    async def _record(self, row: asyncpg.Record) -> ScheduleRecord:
        return await opened_record(self._box, schedule_record(row))

    async def insert_on(self, conn: asyncpg.Connection, tenant_id: uuid.UUID, spec: ScheduleSpec,
                        paused: bool, signing_secret: str, db_now: datetime, *,
                        change: Change = BY_SYSTEM) -> asyncpg.Record:
        """Insert a validated spec (header values and secret sealed) with its first fire,
        its flow control, version 1 and its audit row, in the caller's transaction, after
        the tenant lock."""
        status = ScheduleStatus.PAUSED if paused else ScheduleStatus.ACTIVE
        exclusions = await exclusions_on(conn, tenant_id, spec)
        schedule_id = uuid.uuid4()  # sealing binds each value to it, so it is made here
        columns = await spec_columns(self._box, tenant_id, schedule_id, spec)
        secret = await sealed_secret(self._box, tenant_id, schedule_id, signing_secret)
        row = found_row(await conn.fetchrow(
            Q["schedule_insert"], schedule_id, tenant_id, *columns,
            status.value, first_fire(spec, db_now, exclusions), spec.starts_at,
            spec.ends_at, secret, *semantics_columns(spec),
            *alert_columns(spec), *identity_columns(spec),
        ), tenant_id, "tenant")
        if spec.flow_control is not None:
            await save_flow_control(conn, tenant_id, row["id"], spec)
        await record_change(conn, change, "schedule.create", None,
                            replace(schedule_record(row), spec=spec), row["target"])
        return row

    async def record_as_written(self, row: asyncpg.Record, spec: ScheduleSpec,
                                version: int | None = None) -> ScheduleRecord:
        record = await self._record(row)
        return replace(record, spec=replace(record.spec, flow_control=spec.flow_control),
                       version=version or record.version)

    async def rewrite_on(
        self, conn: asyncpg.Connection, tenant_id: uuid.UUID, row: asyncpg.Record,
        revise: Callable[[ScheduleSpec], ScheduleSpec], *, change: Change = BY_SYSTEM,
        action: str = "schedule.update",
    ) -> tuple[asyncpg.Record, ScheduleSpec, int | None]:
        """The edit of one locked row (schedule_lock: with its db_now), in the caller's
        transaction: revise the spec, take back what the old timetable planned ahead,
        move the cursor, write, sync the flow control, and record the new version and its
        audit row when anything changed. Returns the written row, the spec written and
        the new version (None: nothing differed)."""
        schedule_id = row["id"]
        current = await self._record(row)
        spec = revise(current.spec)  # a domain error here rolls the lock back
        exclusions = await exclusions_on(conn, tenant_id, spec)
        last_fire_at = current.last_fire_at
        if current.spec.timing_differs(spec):  # nothing more on the old timetable
            taken = await unplan(conn, tenant_id, schedule_id)
            if taken is not None:
                last_fire_at = taken[1]
        next_fire_at = rescheduled_next_fire(
            current.spec, spec, current.next_fire_at, last_fire_at, row["db_now"], exclusions,
        )
        status, next_fire_at = status_after_edit(
            current, spec, next_fire_at, last_fire_at, row["db_now"], exclusions)
        columns = await spec_columns(self._box, tenant_id, schedule_id, spec)
        with key_conflicts(spec.key):
            updated = found_row(await conn.fetchrow(
                Q["schedule_update"], tenant_id, schedule_id, *columns,
                spec.starts_at, spec.ends_at, next_fire_at, last_fire_at,
                *semantics_columns(spec), status.value, *alert_columns(spec),
                *identity_columns(spec),
            ), schedule_id)
        await save_flow_control(conn, tenant_id, schedule_id, spec, current.spec)
        version = await record_change(conn, change, action, current,
                                      replace(schedule_record(updated), spec=spec),
                                      updated["target"])
        return updated, spec, version
    async def remove_on(self, conn: asyncpg.Connection, tenant_id: uuid.UUID,
                        schedule_id: uuid.UUID, *, change: Change = BY_SYSTEM,
                        was: str = "active") -> int:
        """Soft-delete in the caller's transaction: cancel the runs not started, give the
        flow-control key's limits and holds back, write the audit row."""
        found_row(await conn.fetchrow(Q["schedule_soft_delete"], tenant_id, schedule_id),
                  schedule_id)
        status = await conn.execute(Q["job_run_cancel_for_schedule"], tenant_id, schedule_id)
        await resync_deleted(conn, tenant_id, schedule_id)
        await audit_schedule(conn, tenant_id, schedule_id, change, "schedule.delete",
                             {"status": [was, "deleted"]})
        return rows_affected(status)

    async def set_status_on(
        self, conn: asyncpg.Connection, tenant_id: uuid.UUID, locked: asyncpg.Record,
        paused: bool, note: str | None = None, *, change: Change = BY_SYSTEM,
        resumed_at: datetime | None = None,
    ) -> tuple[asyncpg.Record | None, int | None]:
        """Pause or resume a locked row in the caller's transaction, with its version and
        audit row: (the row, the new version), or (None, None) when it is neither active
        nor paused. A pause takes back the occurrences written ahead."""
        schedule_id = locked["id"]
        status = ScheduleStatus.PAUSED if paused else ScheduleStatus.ACTIVE
        row: asyncpg.Record | None = await conn.fetchrow(
            Q["schedule_set_status"], tenant_id, schedule_id, status.value, note, resumed_at)
        if row is None:
            return None, None
        if paused:
            row = await unplan_ahead(conn, tenant_id, schedule_id) or row
        before = schedule_record(locked)
        version = await record_change(
            conn, change, f"schedule.{'pause' if paused else 'resume'}", before,
            replace(schedule_record(row), spec=before.spec), row["target"])
        return row, version
