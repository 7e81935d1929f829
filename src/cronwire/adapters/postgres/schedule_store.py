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
from cronwire.adapters.postgres.run_history import run_view
from cronwire.adapters.postgres.schedule_apply import write_plan
from cronwire.adapters.postgres.schedule_changes import (
    audit_schedule,
    check_version,
    record_change,
    revision_spec,
    revisions,
)
from cronwire.adapters.postgres.schedule_rows import (
    found_row,
    key_conflicts,
    schedule_record,
    unplan_ahead,
)
from cronwire.adapters.postgres.schedule_writes import ScheduleRowWriter
from cronwire.adapters.postgres.sealed_fields import opened_record, sealed_secret
from cronwire.adapters.postgres.sql import queries
from cronwire.adapters.postgres.volume import locked_open_runs
from cronwire.domain.access import BY_SYSTEM, Change
from cronwire.domain.apply_plan import ApplyPlan
from cronwire.domain.audit import SEALED, Revision
from cronwire.domain.errors import LimitExceeded, NotFound, StateConflict, StorageError
from cronwire.domain.history import RunView
from cronwire.domain.model import idempotency_key_for, run_id_for
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
        self._writes = ScheduleRowWriter(box)

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
                row = await self._writes.insert_on(conn, tenant_id, spec, paused, signing_secret,
                                           tenant["db_now"], change=change)
        return await self._writes.record_as_written(row, spec)

    async def _sealing_ready(self, tenant_id: uuid.UUID) -> None:
        """Make sure the tenant has a data key before its row is locked: sealing the first
        value of a tenant inserts its key from another connection (secret_data_key
        references tenant), which would wait for our tenant lock forever."""
        await self._box.seal(tenant_id, "", "cronwire.sealing-ready")

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
        with storage_errors(f"updating schedule {schedule_id}"), key_conflicts(None):
            async with self._pool.acquire() as conn, conn.transaction():
                row = found_row(await conn.fetchrow(Q["schedule_lock"], tenant_id, schedule_id),
                             schedule_id)
                check_version(row, if_match)
                updated, spec, version = await self._writes.rewrite_on(conn, tenant_id, row, revise,
                                                               change=change, action=action)
        return await self._writes.record_as_written(updated, spec, version)

    async def get_by_key(self, tenant_id: uuid.UUID, key: str) -> ScheduleRecord:
        row = await self._fetchrow("schedule_get_by_key", tenant_id, key)
        if row is None:
            raise NotFound(f"schedule with key {key!r} not found")
        return await self._record(row)

    async def apply(
        self, tenant_id: uuid.UUID, keys: Sequence[str], decide: ApplyDecider,
        admit: ApplyAdmission, *, prune_managed_by: str | None, dry_run: bool,
        change: Change = BY_SYSTEM,
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
                    await write_plan(self._writes, conn, tenant_id, plan, tenant["db_now"], after,
                                     change)
        return plan, after

    async def delete(self, tenant_id: uuid.UUID, schedule_id: uuid.UUID, *,
                     change: Change = BY_SYSTEM, if_match: int | None = None) -> int:
        with storage_errors(f"deleting schedule {schedule_id}"):
            async with self._pool.acquire() as conn, conn.transaction():
                row = found_row(await conn.fetchrow(Q["schedule_lock"], tenant_id,
                                                    schedule_id), schedule_id)
                check_version(row, if_match)
                return await self._writes.remove_on(conn, tenant_id, schedule_id, change=change,
                                            was=row["status"])

    async def set_paused(
        self, tenant_id: uuid.UUID, schedule_id: uuid.UUID, paused: bool,
        note: str | None = None, *, change: Change = BY_SYSTEM, if_match: int | None = None,
        resumed_at: datetime | None = None,
    ) -> ScheduleRecord:
        verb = "paused" if paused else "resumed"
        with storage_errors(f"setting schedule {schedule_id} {verb}"):
            async with self._pool.acquire() as conn, conn.transaction():
                # The row locked first (against the planner too: a planner transaction
                # holding it commits its runs before a pause takes them back).
                locked = found_row(await conn.fetchrow(Q["schedule_lock"], tenant_id,
                                                       schedule_id), schedule_id)
                check_version(locked, if_match)
                row, version = await self._writes.set_status_on(conn, tenant_id, locked, paused,
                                                        note, change=change,
                                                        resumed_at=resumed_at)
                if row is None:
                    raise StateConflict(
                        f"schedule {schedule_id} is {locked['status']} and cannot be {verb}: "
                        "it has no occurrence left; give it a new `at` or a higher "
                        "`max_runs` to run it again")
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
