"""ScheduleStore on Postgres. Every statement carries the tenant id (queries/schedule.sql, job_run.sql).

Fire times are computed by the pure rules in :mod:`cronwire.domain.schedule_rules`, with
the clock read inside the same transaction that writes them (never the replica's clock).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime

import asyncpg

from cronwire.adapters.postgres.driver_errors import storage_errors
from cronwire.adapters.postgres.flow_store import resync_deleted, save_flow_control
from cronwire.adapters.postgres.run_history import run_view
from cronwire.adapters.postgres.schedule_changes import (
    audit_schedule,
    check_version,
    record_change,
    revision_spec,
    revisions,
)
from cronwire.adapters.postgres.schedule_columns import (
    alert_columns,
    semantics_columns,
    spec_columns,
)
from cronwire.adapters.postgres.schedule_rows import (
    found_row,
    schedule_record,
    unplan,
    unplan_ahead,
)
from cronwire.adapters.postgres.sealed_fields import opened_record, sealed_secret
from cronwire.adapters.postgres.sql import queries, rows_affected
from cronwire.adapters.postgres.volume import locked_open_runs
from cronwire.domain.access import BY_SYSTEM, Change
from cronwire.domain.audit import SEALED, Revision
from cronwire.domain.errors import LimitExceeded, NotFound, StateConflict, StorageError
from cronwire.domain.history import RunView
from cronwire.domain.model import (
    ScheduleStatus,
    idempotency_key_for,
    run_id_for,
)
from cronwire.domain.schedule_rules import first_fire, rescheduled_next_fire, status_after_edit
from cronwire.domain.schedules import ScheduleRecord, ScheduleSpec, TenantLimits
from cronwire.ports.secrets import SecretBox

Q = queries()
NIL_ID = uuid.UUID(int=0)
# A manual instant collides only with another manual trigger in the same microsecond.
MANUAL_INSERT_TRIES = 5


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
        max_schedules: int, change: Change = BY_SYSTEM,
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
                row = found_row(await conn.fetchrow(
                    Q["schedule_insert"], schedule_id, tenant_id, *columns,
                    status.value, first_fire(spec, tenant["db_now"]), spec.starts_at,
                    spec.ends_at, secret, *semantics_columns(spec),
                    *alert_columns(spec),
                ), tenant_id, "tenant")
                if spec.flow_control is not None:
                    await save_flow_control(conn, tenant_id, row["id"], spec)
                await record_change(conn, change, "schedule.create", None,
                                    replace(schedule_record(row), spec=spec), row["target"])
        record = await self._record(row)
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
        revise: Callable[[ScheduleSpec], ScheduleSpec], *, change: Change = BY_SYSTEM,
        if_match: int | None = None, action: str = "schedule.update",
    ) -> ScheduleRecord:
        with storage_errors(f"updating schedule {schedule_id}"):
            async with self._pool.acquire() as conn, conn.transaction():
                row = found_row(await conn.fetchrow(Q["schedule_lock"], tenant_id, schedule_id),
                             schedule_id)
                check_version(row, if_match)
                current = await self._record(row)
                spec = revise(current.spec)  # a domain error here rolls the lock back
                last_fire_at = current.last_fire_at
                if current.spec.timing_differs(spec):  # nothing more on the old timetable
                    taken = await unplan(conn, tenant_id, schedule_id)
                    if taken is not None:
                        last_fire_at = taken[1]
                next_fire_at = rescheduled_next_fire(
                    current.spec, spec, current.next_fire_at, last_fire_at, row["db_now"],
                )
                status, next_fire_at = status_after_edit(
                    current, spec, next_fire_at, last_fire_at, row["db_now"])
                columns = await spec_columns(self._box, tenant_id, schedule_id, spec)
                updated = found_row(await conn.fetchrow(
                    Q["schedule_update"], tenant_id, schedule_id, *columns,
                    spec.starts_at, spec.ends_at, next_fire_at, last_fire_at,
                    *semantics_columns(spec), status.value, *alert_columns(spec),
                ), schedule_id)
                await save_flow_control(conn, tenant_id, schedule_id, spec, current.spec)
                version = await record_change(
                    conn, change, action, current,
                    replace(schedule_record(updated), spec=spec), updated["target"])
        record = await self._record(updated)
        return replace(record, spec=replace(record.spec, flow_control=spec.flow_control),
                       version=version or record.version)

    async def delete(self, tenant_id: uuid.UUID, schedule_id: uuid.UUID, *,
                     change: Change = BY_SYSTEM, if_match: int | None = None) -> int:
        with storage_errors(f"deleting schedule {schedule_id}"):
            async with self._pool.acquire() as conn, conn.transaction():
                row = found_row(await conn.fetchrow(Q["schedule_lock"], tenant_id,
                                                    schedule_id), schedule_id)
                check_version(row, if_match)
                await conn.execute(Q["schedule_soft_delete"], tenant_id, schedule_id)
                status = await conn.execute(
                    Q["job_run_cancel_for_schedule"], tenant_id, schedule_id
                )
                await resync_deleted(conn, tenant_id, schedule_id)
                await audit_schedule(conn, tenant_id, schedule_id, change, "schedule.delete",
                                     {"status": [row["status"], "deleted"]})
        return rows_affected(status)

    async def set_paused(
        self, tenant_id: uuid.UUID, schedule_id: uuid.UUID, paused: bool,
        note: str | None = None, *, change: Change = BY_SYSTEM, if_match: int | None = None,
    ) -> ScheduleRecord:
        status = ScheduleStatus.PAUSED if paused else ScheduleStatus.ACTIVE
        verb = "paused" if paused else "resumed"
        with storage_errors(f"setting schedule {schedule_id} {verb}"):
            async with self._pool.acquire() as conn, conn.transaction():
                # The row locked first (against the planner too: a planner transaction
                # holding it commits its runs before a pause takes them back).
                locked = found_row(await conn.fetchrow(Q["schedule_lock"], tenant_id,
                                                       schedule_id), schedule_id)
                check_version(locked, if_match)
                row = await conn.fetchrow(
                    Q["schedule_set_status"], tenant_id, schedule_id, status.value, note)
                if row is None:
                    raise StateConflict(
                        f"schedule {schedule_id} is {locked['status']} and cannot be {verb}: "
                        "it has no occurrence left; give it a new `at` or a higher "
                        "`max_runs` to run it again")
                if paused:
                    row = await unplan_ahead(conn, tenant_id, schedule_id) or row
                before = schedule_record(locked)
                version = await record_change(
                    conn, change, f"schedule.{'pause' if paused else 'resume'}", before,
                    replace(schedule_record(row), spec=before.spec), row["target"])
        record = await self._record(row)
        return replace(record, version=version or record.version)

    async def rotate_secret(
        self, tenant_id: uuid.UUID, schedule_id: uuid.UUID, new_secret: str,
        overlap_seconds: int, *, change: Change = BY_SYSTEM,
    ) -> ScheduleRecord:
        sealed = await sealed_secret(self._box, tenant_id, schedule_id, new_secret)
        with storage_errors(f"rotating the secret of schedule {schedule_id}"):
            async with self._pool.acquire() as conn, conn.transaction():
                row = found_row(await conn.fetchrow(
                    Q["schedule_rotate_secret"], tenant_id, schedule_id, sealed,
                    float(overlap_seconds)), schedule_id)
                same = schedule_record(row)
                version = await record_change(conn, change, "schedule.rotate_secret", same,
                                              same, row["target"],
                                              also={"signing_secret": [SEALED, SEALED]})
        record = await self._record(row)
        return replace(record, version=version or record.version)

    async def revisions(self, tenant_id: uuid.UUID, schedule_id: uuid.UUID,
                        limit: int) -> Sequence[Revision]:
        await self.get(tenant_id, schedule_id)  # NotFound for a missing or foreign one
        with storage_errors(f"reading the revisions of schedule {schedule_id}"):
            return await revisions(self._pool, tenant_id, schedule_id, limit)

    async def revision_spec(self, tenant_id: uuid.UUID, schedule_id: uuid.UUID,
                            version: int) -> ScheduleSpec:
        current = await self.get(tenant_id, schedule_id)
        with storage_errors(f"reading version {version} of schedule {schedule_id}"):
            async with self._pool.acquire() as conn:
                return await revision_spec(conn, self._box, current, version)

    async def trigger(self, tenant_id: uuid.UUID, schedule_id: uuid.UUID, *,
                      max_pending_runs: int, change: Change = BY_SYSTEM) -> RunView:
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
                        await audit_schedule(conn, tenant_id, schedule_id, change,
                                             "schedule.trigger", {"run_id": [None, str(run_id)]})
                        return run_view(row)
        raise StorageError(f"no free instant for a manual run of {schedule_id}; try again")

    async def _fetchrow(self, name: str, *args: object) -> asyncpg.Record | None:
        with storage_errors(name):
            row: asyncpg.Record | None = await self._pool.fetchrow(Q[name], *args)
        return row
