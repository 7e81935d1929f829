"""RunHistory on Postgres: keyset pages of job_run and a run's attempt evidence."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import UTC, datetime

import asyncpg

from cronwire.adapters.postgres.driver_errors import storage_errors
from cronwire.adapters.postgres.sql import queries
from cronwire.domain.errors import NotFound
from cronwire.domain.history import RunDetail, RunQuery, RunView
from cronwire.domain.model import AttemptRecord, RunStatus, SkipReason, Trigger

Q = queries()
# "No bound" as concrete values, so every query keeps one shape the planner can prune on.
EARLIEST = datetime(1, 1, 2, tzinfo=UTC)
LATEST = datetime(9999, 12, 30, tzinfo=UTC)
LAST_ID = uuid.UUID(int=(1 << 128) - 1)


def run_view(row: asyncpg.Record) -> RunView:
    """A job_run row as the history shows it (the queries select exactly its fields)."""
    reason = row["skip_reason"]
    return RunView(**{**dict(row), "status": RunStatus(row["status"]),
                      "trigger": Trigger(row["trigger"]),
                      "skip_reason": SkipReason(reason) if reason else None})


def _attempt(row: asyncpg.Record) -> AttemptRecord:
    return AttemptRecord(**dict(row))


def list_arguments(tenant_id: uuid.UUID, query: RunQuery) -> tuple[str, list[object]]:
    """The named query and its parameters for one page (public for EXPLAIN tests)."""
    before_at, before_id = (
        (query.before.scheduled_for, query.before.id) if query.before else (LATEST, LAST_ID)
    )
    since, until = query.since or EARLIEST, query.until or LATEST
    status = query.status.value if query.status is not None else None
    if query.schedule_id is not None:
        return "job_run_list_for_schedule", [tenant_id, since, until, before_at, query.limit, status,
                                         query.schedule_id]
    args: list[object] = [tenant_id, since, until, before_at, before_id, query.limit]
    if status is not None:
        return "job_run_list_for_tenant_status", [*args, status]
    return "job_run_list_for_tenant", args


class PostgresRunHistory:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def list(self, tenant_id: uuid.UUID, query: RunQuery) -> Sequence[RunView]:
        name, args = list_arguments(tenant_id, query)
        with storage_errors("reading run history"):
            rows = await self._pool.fetch(Q[name], *args)
        return [run_view(row) for row in rows]

    async def get(self, tenant_id: uuid.UUID, run_id: uuid.UUID) -> RunDetail:
        with storage_errors(f"reading run {run_id}"):
            async with self._pool.acquire() as conn:
                row = await conn.fetchrow(Q["job_run_get"], tenant_id, run_id)
                if row is None:
                    raise NotFound(f"run {run_id} not found")
                attempts = await conn.fetch(
                    Q["job_run_attempt_list"], tenant_id, run_id, row["scheduled_for"]
                )
        return RunDetail(run_view(row), tuple(_attempt(a) for a in attempts))
