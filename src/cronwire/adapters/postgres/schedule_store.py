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
from cronwire.adapters.postgres.schedule_apply import write_plan
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
from cronwire.adapters.postgres.volume import locked_open_runs
from cronwire.domain.apply_plan import ApplyPlan
from cronwire.domain.errors import LimitExceeded, NotFound, StateConflict, StorageError
from cronwire.domain.history import RunView
from cronwire.domain.model import ScheduleStatus, idempotency_key_for, run_id_for
from cronwire.domain.schedule_rules import first_fire, rescheduled_next_fire, status_after_edit
from cronwire.domain.schedules import ScheduleRecord, ScheduleSpec, TenantLimits
from cronwire.ports.secrets import SecretBox
from cronwire.ports.tenant import ApplyAdmission, ApplyDecider

# Re-exported: run_store and run_commands import them from here.
__all__ = ["PostgresScheduleStore", "found_row", "schedule_record", "unplan_ahead"]

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
        max_schedules: int,
    ) -> ScheduleRecord:
        await self._sealing_ready(tenant_id)
        with storage_errors("creating a schedule"), key_conflicts(spec.key):
            async with self._pool.acquire() as conn, conn.transaction():
                tenant = found_row(await conn.fetchrow(Q["tenant_lock_live_count"], tenant_id),
                                tenant_id, "tenant")
                if tenant["live"] >= max_schedules:
                    raise LimitExceeded(
                        "max_schedules", None,
                        f"this tenant already has {tenant['live']} schedules "
                        f"(limit {max_schedules}); delete one first",
                    )
                row = await self.insert_on(conn, tenant_id, spec, paused, signing_secret,
                                         tenant["db_now"])
        return await self.record_as_written(row, spec)

    async def _sealing_ready(self, tenant_id: uuid.UUID) -> None:
        """Make sure the tenant has a data key before its row is locked: sealing the first
        value of a tenant inserts its key from another connection (secret_data_key
        references tenant), which would wait for our tenant lock forever."""
        await self._box.seal(tenant_id, "", "cronwire.sealing-ready")

    async def insert_on(self, conn: asyncpg.Connection, tenant_id: uuid.UUID, spec: ScheduleSpec,
                      paused: bool, signing_secret: str, db_now: datetime) -> asyncpg.Record:
        """Insert a validated spec (header values and secret sealed) with its first fire
        and its flow control, in the caller's transaction, after the tenant lock."""
        status = ScheduleStatus.PAUSED if paused else ScheduleStatus.ACTIVE
        schedule_id = uuid.uuid4()  # sealing binds each value to it, so it is made here
        columns = await spec_columns(self._box, tenant_id, schedule_id, spec)
        secret = await sealed_secret(self._box, tenant_id, schedule_id, signing_secret)
        row = found_row(await conn.fetchrow(
            Q["schedule_insert"], schedule_id, tenant_id, *columns,
            status.value, first_fire(spec, db_now), spec.starts_at,
            spec.ends_at, secret, *semantics_columns(spec),
            *alert_columns(spec), *identity_columns(spec),
        ), tenant_id, "tenant")
        if spec.flow_control is not None:
            await save_flow_control(conn, tenant_id, row["id"], spec)
        return row

    async def record_as_written(self, row: asyncpg.Record, spec: ScheduleSpec) -> ScheduleRecord:
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
        revise: Callable[[ScheduleSpec], ScheduleSpec],
    ) -> ScheduleRecord:
        with storage_errors(f"updating schedule {schedule_id}"), key_conflicts(None):
            async with self._pool.acquire() as conn, conn.transaction():
                row = found_row(await conn.fetchrow(Q["schedule_lock"], tenant_id, schedule_id),
                             schedule_id)
                updated, spec = await self.rewrite_on(conn, tenant_id, row, revise)
        return await self.record_as_written(updated, spec)

    async def rewrite_on(
        self, conn: asyncpg.Connection, tenant_id: uuid.UUID, row: asyncpg.Record,
        revise: Callable[[ScheduleSpec], ScheduleSpec],
    ) -> tuple[asyncpg.Record, ScheduleSpec]:
        """The edit of one locked row (schedule_lock: with its db_now), in the caller's
        transaction: revise the spec, take back what the old timetable planned ahead,
        move the cursor, write, and sync the flow control. Returns the written row and
        the spec written."""
        schedule_id = row["id"]
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
        with key_conflicts(spec.key):
            updated = found_row(await conn.fetchrow(
                Q["schedule_update"], tenant_id, schedule_id, *columns,
                spec.starts_at, spec.ends_at, next_fire_at, last_fire_at,
                *semantics_columns(spec), status.value, *alert_columns(spec),
                *identity_columns(spec),
            ), schedule_id)
        await save_flow_control(conn, tenant_id, schedule_id, spec, current.spec)
        return updated, spec

    async def get_by_key(self, tenant_id: uuid.UUID, key: str) -> ScheduleRecord:
        row = await self._fetchrow("schedule_get_by_key", tenant_id, key)
        if row is None:
            raise NotFound(f"schedule with key {key!r} not found")
        return await self._record(row)

    async def apply(
        self, tenant_id: uuid.UUID, keys: Sequence[str], decide: ApplyDecider,
        admit: ApplyAdmission, *, prune_managed_by: str | None, dry_run: bool,
    ) -> tuple[ApplyPlan, dict[str, ScheduleRecord]]:
        await self._sealing_ready(tenant_id)
        with storage_errors("applying schedules"), key_conflicts(None):
            async with self._pool.acquire() as conn, conn.transaction():
                # The tenant's lock (as create takes it): applies, PUTs by key and creates
                # of one tenant run one after another, so a second apply decides on what
                # the first wrote, and the quota is counted once.
                tenant = found_row(await conn.fetchrow(Q["tenant_lock_live_count"], tenant_id),
                                   tenant_id, "tenant")
                rows = await conn.fetch(Q["schedule_list_for_apply"], tenant_id, list(keys),
                                        prune_managed_by)
                current = [await self._record(row) for row in rows]
                plan = await decide(current, tenant["live"])
                await admit(plan)
                after = plan.records_read()
                if not dry_run and plan.changes_anything:
                    await write_plan(self, conn, tenant_id, plan, tenant["db_now"], after)
        return plan, after

    async def delete(self, tenant_id: uuid.UUID, schedule_id: uuid.UUID) -> int:
        with storage_errors(f"deleting schedule {schedule_id}"):
            async with self._pool.acquire() as conn, conn.transaction():
                return await self.remove_on(conn, tenant_id, schedule_id)

    async def remove_on(self, conn: asyncpg.Connection, tenant_id: uuid.UUID,
                      schedule_id: uuid.UUID) -> int:
        """Soft-delete in the caller's transaction: cancel the runs not started, give the
        flow-control key's limits and holds back."""
        found_row(await conn.fetchrow(Q["schedule_soft_delete"], tenant_id, schedule_id),
                  schedule_id)
        status = await conn.execute(Q["job_run_cancel_for_schedule"], tenant_id, schedule_id)
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
                row = await self.set_status_on(conn, tenant_id, schedule_id, True, note)
                if row is None:
                    await self._not_pausable(tenant_id, schedule_id, "paused")
        return await self._record(found_row(row, schedule_id))

    async def set_status_on(self, conn: asyncpg.Connection, tenant_id: uuid.UUID,
                          schedule_id: uuid.UUID, paused: bool,
                          note: str | None = None) -> asyncpg.Record | None:
        """Pause or resume in the caller's transaction (None: not active or paused). The
        status update locks the row first: a planner transaction holding it commits its
        runs before a pause takes back those written ahead."""
        status = ScheduleStatus.PAUSED if paused else ScheduleStatus.ACTIVE
        row: asyncpg.Record | None = await conn.fetchrow(
            Q["schedule_set_status"], tenant_id, schedule_id, status.value, note)
        if row is None or not paused:
            return row
        return await unplan_ahead(conn, tenant_id, schedule_id) or row

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
