"""PostgresRunStore: every write on a leased run, batched, each predicated on the lease.

Every statement takes the owner and matches only rows with ``claimed_by = owner`` and
``status = 'running'`` (lease rule 3); the ids a statement returns are the writes that
landed, and the caller counts the others as lost leases.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from uuid import UUID

import asyncpg

from cronwire.adapters.postgres.driver_errors import storage_errors
from cronwire.adapters.postgres.sql import queries
from cronwire.domain.model import RunResolution

Q = queries("executor")


def _affected(status: str) -> int:
    """Rows touched, from a command tag such as ``UPDATE 12``."""
    return int(status.rsplit(" ", 1)[-1])


def _columns(resolutions: Sequence[RunResolution]) -> list[list[object]]:
    """One array per ``job_run_resolve`` parameter after the owner, in order."""
    columns: list[list[object]] = [[] for _ in range(13)]
    for r in resolutions:
        a = r.attempt
        row = (
            r.run_id, r.scheduled_for, str(r.status), r.attempt_count, r.retry_delay_seconds,
            r.last_status_code, r.last_error,
            a.tenant_id if a else None, a.started_at if a else None, a.finished_at if a else None,
            a.outcome if a else None, a.duration_ms if a else None,
            a.response_excerpt if a else None,
        )
        for column, value in zip(columns, row, strict=True):
            column.append(value)
    return columns


def _keys(runs: Sequence[tuple[UUID, datetime]]) -> tuple[list[UUID], list[datetime]]:
    return [run_id for run_id, _ in runs], [at for _, at in runs]


class PostgresRunStore:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def renew_leases(
        self, owner: str, runs: Sequence[tuple[UUID, datetime]], lease_seconds: float
    ) -> set[UUID]:
        if not runs:
            return set()
        ids, times = _keys(runs)
        with storage_errors("renew leases"):
            rows = await self._pool.fetch(
                Q["job_run_renew_leases"], owner, ids, times, lease_seconds
            )
        return {row["id"] for row in rows}

    async def resolve(self, owner: str, resolutions: Sequence[RunResolution]) -> set[UUID]:
        if not resolutions:
            return set()
        with storage_errors("resolve runs"):
            rows = await self._pool.fetch(Q["job_run_resolve"], owner, *_columns(resolutions))
        return {row["id"] for row in rows}

    async def fail_minimal(
        self, owner: str, run_id: UUID, scheduled_for: datetime, error: str
    ) -> bool:
        with storage_errors("fail run"):
            status = await self._pool.execute(
                Q["job_run_fail_minimal"], owner, run_id, scheduled_for, error[:500]
            )
        return _affected(status) == 1

    async def release(self, owner: str, runs: Sequence[tuple[UUID, datetime]]) -> int:
        return await self._give_back(owner, runs, None)

    async def defer(
        self, owner: str, runs: Sequence[tuple[UUID, datetime]], until: datetime
    ) -> int:
        return await self._give_back(owner, runs, until)

    async def _give_back(
        self, owner: str, runs: Sequence[tuple[UUID, datetime]], until: datetime | None
    ) -> int:
        if not runs:
            return 0
        ids, times = _keys(runs)
        with storage_errors("release runs" if until is None else "defer runs"):
            status = await self._pool.execute(Q["job_run_give_back"], owner, ids, times, until)
        return _affected(status)
