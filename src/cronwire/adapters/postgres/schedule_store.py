"""ScheduleStore on Postgres. Every statement carries the tenant id (queries/schedule.sql, job_run.sql).

Fire times are computed by the pure rules in :mod:`cronwire.domain.schedule_rules`, with
the clock read inside the same transaction that writes them (never the replica's clock).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime
from typing import NoReturn

import asyncpg

from cronwire.adapters.postgres.driver_errors import storage_errors
from cronwire.adapters.postgres.flow_store import resync_deleted, save_flow_control
from cronwire.adapters.postgres.run_history import run_view
from cronwire.adapters.postgres.schedule_columns import (
    alert_columns,
    semantics_columns,
    spec_columns,
)
from cronwire.adapters.postgres.sealed_fields import opened_record, sealed_secret
from cronwire.adapters.postgres.sql import queries, rows_affected
from cronwire.adapters.postgres.volume import locked_open_runs
from cronwire.domain.alerts import AlertRules
from cronwire.domain.documents import (
    retry_from_document,
    target_from_document,
)
from cronwire.domain.errors import LimitExceeded, NotFound, StateConflict, StorageError
from cronwire.domain.flow_control import flow_from_document
from cronwire.domain.history import RunView
from cronwire.domain.model import (
    MisfirePolicy,
    OverlapPolicy,
    ScheduleStatus,
    idempotency_key_for,
    run_id_for,
)
from cronwire.domain.rrules import is_rrule
from cronwire.domain.schedule_rules import first_fire, rescheduled_next_fire, status_after_edit
from cronwire.domain.schedules import ScheduleRecord, ScheduleSpec, TenantLimits
from cronwire.ports.secrets import SecretBox

Q = queries()
NIL_ID = uuid.UUID(int=0)
# A manual instant collides only with another manual trigger in the same microsecond.
MANUAL_INSERT_TRIES = 5


async def _unplan(
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
    taken = await _unplan(conn, tenant_id, schedule_id)
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
    )


def found_row(row: asyncpg.Record | None, object_id: uuid.UUID,
           kind: str = "schedule") -> asyncpg.Record:
    if row is None:
        raise NotFound(f"{kind} {object_id} not found")
    return row


class PostgresScheduleStore:
    """Seals the signing secrets and header values it writes and opens those it reads
    (``box``): records leave it in clear, rows hold them sealed."""

    def __init__(self, pool: asyncpg.Pool, box: SecretBox) -> None:
        self._pool = pool
        self._box = box

    async def _record(self, row: asyncpg.Record) -> ScheduleRecord:
        return await opened_record(self._box, schedule_record(row))

    async def limits_and_now(
        self, tenant_id: uuid.UUID, defaults: TenantLimits
    ) -> tuple[TenantLimits, datetime]:
        with storage_errors("reading tenant limits"):
            row = await self._pool.fetchrow(Q["tenant_limits_now"], tenant_id)
        if row is None:
            raise NotFound(f"tenant {tenant_id} not found")
        limits = defaults.overridden_by(
            max_schedules=row["max_schedules"],
            min_interval_seconds=row["min_interval_seconds"],
            max_body_bytes=row["max_body_bytes"],
            max_headers=row["max_headers"],
        )
        return limits, row["db_now"]

    async def create(
        self, tenant_id: uuid.UUID, spec: ScheduleSpec, *, paused: bool, signing_secret: str,
        max_schedules: int,
    ) -> ScheduleRecord:
        status = ScheduleStatus.PAUSED if paused else ScheduleStatus.ACTIVE
        schedule_id = uuid.uuid4()  # sealing binds each value to it, so it is made here
        columns = await spec_columns(self._box, tenant_id, schedule_id, spec)
        secret = await sealed_secret(self._box, tenant_id, schedule_id, signing_secret)
        with storage_errors("creating a schedule"):
            async with self._pool.acquire() as conn, conn.transaction():
                tenant = found_row(await conn.fetchrow(Q["tenant_lock_live_count"], tenant_id),
                                tenant_id, "tenant")
                if tenant["live"] >= max_schedules:
                    raise LimitExceeded(
                        "max_schedules", None,
                        f"this tenant already has {tenant['live']} schedules "
                        f"(limit {max_schedules}); delete one first",
                    )
                row = await conn.fetchrow(
                    Q["schedule_insert"], schedule_id, tenant_id, *columns,
                    status.value, first_fire(spec, tenant["db_now"]), spec.starts_at,
                    spec.ends_at, secret, *semantics_columns(spec),
                    *alert_columns(spec),
                )
                if row is not None and spec.flow_control is not None:
                    await save_flow_control(conn, tenant_id, row["id"], spec)
        record = await self._record(found_row(row, tenant_id, "tenant"))
        return replace(record, spec=replace(record.spec, flow_control=spec.flow_control))

    async def db_now(self) -> datetime:
        with storage_errors("reading the database clock"):
            now: datetime = await self._pool.fetchval(Q["database_now"])
        return now

    async def get(self, tenant_id: uuid.UUID, schedule_id: uuid.UUID) -> ScheduleRecord:
        return await self._record(found_row(
            await self._fetchrow("schedule_get", tenant_id, schedule_id), schedule_id))

    async def list(
        self, tenant_id: uuid.UUID, *, after: uuid.UUID | None, limit: int
    ) -> Sequence[ScheduleRecord]:
        with storage_errors("listing schedules"):
            rows = await self._pool.fetch(Q["schedule_list"], tenant_id, after or NIL_ID, limit)
        return [await self._record(row) for row in rows]

    async def update(
        self, tenant_id: uuid.UUID, schedule_id: uuid.UUID,
        revise: Callable[[ScheduleSpec], ScheduleSpec],
    ) -> ScheduleRecord:
        with storage_errors(f"updating schedule {schedule_id}"):
            async with self._pool.acquire() as conn, conn.transaction():
                row = found_row(await conn.fetchrow(Q["schedule_lock"], tenant_id, schedule_id),
                             schedule_id)
                current = await self._record(row)
                spec = revise(current.spec)  # a domain error here rolls the lock back
                last_fire_at = current.last_fire_at
                if current.spec.timing_differs(spec):  # nothing more on the old timetable
                    taken = await _unplan(conn, tenant_id, schedule_id)
                    if taken is not None:
                        last_fire_at = taken[1]
                next_fire_at = rescheduled_next_fire(
                    current.spec, spec, current.next_fire_at, last_fire_at, row["db_now"],
                )
                status, next_fire_at = status_after_edit(
                    current, spec, next_fire_at, last_fire_at, row["db_now"])
                columns = await spec_columns(self._box, tenant_id, schedule_id, spec)
                updated = await conn.fetchrow(
                    Q["schedule_update"], tenant_id, schedule_id, *columns,
                    spec.starts_at, spec.ends_at, next_fire_at, last_fire_at,
                    *semantics_columns(spec), status.value, *alert_columns(spec),
                )
                await save_flow_control(conn, tenant_id, schedule_id, spec, current.spec)
        record = await self._record(found_row(updated, schedule_id))
        return replace(record, spec=replace(record.spec, flow_control=spec.flow_control))

    async def delete(self, tenant_id: uuid.UUID, schedule_id: uuid.UUID) -> int:
        with storage_errors(f"deleting schedule {schedule_id}"):
            async with self._pool.acquire() as conn, conn.transaction():
                found_row(await conn.fetchrow(Q["schedule_soft_delete"], tenant_id, schedule_id),
                       schedule_id)
                status = await conn.execute(
                    Q["job_run_cancel_for_schedule"], tenant_id, schedule_id
                )
                await resync_deleted(conn, tenant_id, schedule_id)
        return rows_affected(status)

    async def set_paused(
        self, tenant_id: uuid.UUID, schedule_id: uuid.UUID, paused: bool,
        note: str | None = None,
    ) -> ScheduleRecord:
        status = ScheduleStatus.PAUSED if paused else ScheduleStatus.ACTIVE
        if not paused:
            row = await self._fetchrow("schedule_set_status", tenant_id, schedule_id,
                                       status.value, None)
            if row is None:
                await self._not_pausable(tenant_id, schedule_id, "resumed")
            return await self._record(row)
        with storage_errors(f"pausing schedule {schedule_id}"):
            async with self._pool.acquire() as conn, conn.transaction():
                # The status update locks the row first: a planner transaction holding it
                # commits its runs before they are taken back.
                row = await conn.fetchrow(
                    Q["schedule_set_status"], tenant_id, schedule_id, status.value, note)
                if row is None:
                    await self._not_pausable(tenant_id, schedule_id, "paused")
                row = await unplan_ahead(conn, tenant_id, schedule_id) or row
        return await self._record(found_row(row, schedule_id))

    async def _not_pausable(self, tenant_id: uuid.UUID, schedule_id: uuid.UUID,
                            verb: str) -> NoReturn:
        """Why a pause or resume matched no row: the schedule is missing, or completed."""
        row = found_row(await self._fetchrow("schedule_get", tenant_id, schedule_id), schedule_id)
        raise StateConflict(
            f"schedule {schedule_id} is {row['status']} and cannot be {verb}: it has no "
            "occurrence left; give it a new `at` or a higher `max_runs` to run it again")

    async def rotate_secret(
        self, tenant_id: uuid.UUID, schedule_id: uuid.UUID, new_secret: str,
        overlap_seconds: int,
    ) -> ScheduleRecord:
        sealed = await sealed_secret(self._box, tenant_id, schedule_id, new_secret)
        row = await self._fetchrow(
            "schedule_rotate_secret", tenant_id, schedule_id, sealed, float(overlap_seconds)
        )
        return await self._record(found_row(row, schedule_id))

    async def trigger(self, tenant_id: uuid.UUID, schedule_id: uuid.UUID, *,
                      max_pending_runs: int) -> RunView:
        with storage_errors(f"triggering schedule {schedule_id}"):
            async with self._pool.acquire() as conn, conn.transaction():
                found_row(await conn.fetchrow(Q["schedule_lock_live"], tenant_id, schedule_id),
                       schedule_id)
                (await locked_open_runs(conn, tenant_id, max_pending_runs)).check(1)
                for _ in range(MANUAL_INSERT_TRIES):
                    instant: datetime = await conn.fetchval(Q["job_run_manual_instant"])
                    run_id = run_id_for(schedule_id, instant)
                    row = await conn.fetchrow(
                        Q["job_run_insert_manual"], run_id, tenant_id, schedule_id, instant,
                        idempotency_key_for(run_id),
                    )
                    if row is not None:
                        return run_view(row)
        raise StorageError(f"no free instant for a manual run of {schedule_id}; try again")

    async def _fetchrow(self, name: str, *args: object) -> asyncpg.Record | None:
        with storage_errors(name):
            row: asyncpg.Record | None = await self._pool.fetchrow(Q[name], *args)
        return row
