"""An apply's writes (ADR 0057), in the store's transaction: each deleted, changed or new
schedule goes through the path its single-schedule twin takes (DELETE, PATCH, pause or
resume, POST), so sealing, flow control and the planner's cursor stay right."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime
from typing import Protocol

import asyncpg

from cronwire.adapters.postgres.schedule_rows import found_row, key_conflicts
from cronwire.adapters.postgres.sql import queries
from cronwire.domain.access import Change
from cronwire.domain.apply_plan import ApplyPlan
from cronwire.domain.schedules import ScheduleRecord, ScheduleSpec

Q = queries()


class RowWrites(Protocol):
    """What PostgresScheduleStore does in a caller's transaction (its create, update,
    pause/resume and delete are each one of these in a transaction of their own)."""

    async def insert_on(self, conn: asyncpg.Connection, tenant_id: uuid.UUID,
                        spec: ScheduleSpec, paused: bool, signing_secret: str,
                        db_now: datetime, *, change: Change = ...) -> asyncpg.Record: ...

    async def rewrite_on(self, conn: asyncpg.Connection, tenant_id: uuid.UUID,
                         row: asyncpg.Record, revise: Callable[[ScheduleSpec], ScheduleSpec],
                         *, change: Change = ..., action: str = ...,
                         ) -> tuple[asyncpg.Record, ScheduleSpec, int | None]: ...

    async def remove_on(self, conn: asyncpg.Connection, tenant_id: uuid.UUID,
                        schedule_id: uuid.UUID, *, change: Change = ...,
                        was: str = ...) -> int: ...

    async def set_status_on(self, conn: asyncpg.Connection, tenant_id: uuid.UUID,
                            locked: asyncpg.Record, paused: bool, note: str | None = None,
                            *, change: Change = ...,
                            ) -> tuple[asyncpg.Record | None, int | None]: ...

    async def record_as_written(self, row: asyncpg.Record, spec: ScheduleSpec,
                                version: int | None = None) -> ScheduleRecord: ...


async def write_plan(store: RowWrites, conn: asyncpg.Connection,
                     tenant_id: uuid.UUID, plan: ApplyPlan, db_now: datetime,
                     after: dict[str, ScheduleRecord], change: Change) -> None:
    """The plan's writes, each through the path its single-schedule twin takes (its
    version and audit row included)."""
    for record in plan.deleted:
        await store.remove_on(conn, tenant_id, record.id, change=change,
                              was=record.status.value)
    for revision in plan.updated:
        key = revision.record.spec.key or ""
        row = found_row(await conn.fetchrow(Q["schedule_lock"], tenant_id,
                                            revision.record.id), revision.record.id)
        version = None
        if revision.spec_changed:
            row, _, version = await store.rewrite_on(conn, tenant_id, row, revision.revise,
                                                     change=change)
        if revision.paused is not None:
            locked = found_row(await conn.fetchrow(Q["schedule_lock"], tenant_id,
                                                   revision.record.id), revision.record.id)
            changed, paused_version = await store.set_status_on(
                conn, tenant_id, locked, revision.paused, change=change)
            row, version = changed or row, paused_version or version
        after[key] = await store.record_as_written(row, revision.spec, version)
    for creation in plan.created:
        desired = creation.desired
        with key_conflicts(desired.key):
            row = await store.insert_on(conn, tenant_id, desired.spec, bool(desired.paused),
                                        creation.signing_secret, db_now, change=change)
        after[desired.key] = replace(await store.record_as_written(row, desired.spec),
                                     signing_secret=creation.signing_secret)
