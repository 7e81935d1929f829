"""PostgresRunStore: every write on a leased run, batched, each predicated on the lease.

Every statement takes the owner and the lease generation and matches only rows with
``claimed_by = owner``, ``status = 'running'`` and that generation (lease rule 3); the ids
a statement returns are the writes that landed, and the caller counts the others as lost
leases.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Sequence
from datetime import datetime
from uuid import UUID

import asyncpg

from cronwire.adapters.postgres.claim_source import STATUS_BY_TEXT
from cronwire.adapters.postgres.driver_errors import storage_errors
from cronwire.adapters.postgres.schedule_rows import unplan_ahead
from cronwire.adapters.postgres.sql import queries
from cronwire.domain.errors import StorageError
from cronwire.domain.model import LeaseKey, RunResolution, RunStatus

Q = queries()
log = logging.getLogger(__name__)


def _columns(resolutions: Sequence[RunResolution]) -> list[list[object] | None]:
    """One array per ``job_run_resolve`` parameter after the owner, in order; the holds
    (Retry-After, flow control) are NULL when no result asks for one."""
    columns: list[list[object]] = [[] for _ in range(15)]
    for r in resolutions:
        a = r.attempt
        row = (
            r.run_id, r.scheduled_for, str(r.status), r.attempt_count, r.retry_delay_seconds,
            r.last_status_code, r.last_error,
            a.tenant_id if a else None, a.started_at if a else None, a.finished_at if a else None,
            a.outcome if a else None, a.duration_ms if a else None,
            a.response_excerpt if a else None, r.lease_generation, r.hold_seconds,
        )
        for column, value in zip(columns, row, strict=True):
            column.append(value)
    holds = columns[-1]
    return [*columns[:-1], holds if any(h is not None for h in holds) else None]


def _keys(runs: Sequence[LeaseKey]) -> tuple[list[UUID], list[datetime], list[int]]:
    return [k[0] for k in runs], [k[1] for k in runs], [k[2] for k in runs]


class PostgresRunStore:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def renew_leases(
        self, owner: str, runs: Sequence[LeaseKey], lease_seconds: float,
        started: Collection[UUID] = frozenset(),
    ) -> set[UUID]:
        if not runs:
            return set()
        ids, times, generations = _keys(runs)
        with storage_errors("renew leases"):
            rows = await self._pool.fetch(
                Q["job_run_renew"], owner, ids, times, generations,
                [run_id in started for run_id in ids], lease_seconds,
            )
        return {row["id"] for row in rows}

    async def superseded(self, owner: str, runs: Sequence[LeaseKey]) -> set[UUID]:
        if not runs:
            return set()
        ids, times, generations = _keys(runs)
        with storage_errors("check superseded leases"):
            rows = await self._pool.fetch(Q["job_run_superseded"], owner, ids, times, generations)
        return {row["id"] for row in rows}

    async def resolve(
        self, owner: str, resolutions: Sequence[RunResolution]
    ) -> dict[UUID, RunStatus]:
        if not resolutions:
            return {}
        with storage_errors("resolve runs"):
            rows = await self._pool.fetch(Q["job_run_resolve"], owner, *_columns(resolutions))
        landed = {row["id"]: STATUS_BY_TEXT[row["status"]] for row in rows if row["id"] is not None}
        paused = [(row["paused_tenant"], row["paused_schedule"]) for row in rows
                  if row["id"] is None]
        if paused:
            await self._unplan_paused(paused)
        return landed

    async def _unplan_paused(self, paused: list[tuple[UUID, UUID]]) -> None:
        """Schedules the resolve just paused (pause_after_failures) take back what the
        planner wrote ahead, as a tenant's pause does. The pause itself was decided and
        written with the failure; this only tidies the look-ahead, so a failure here is
        logged, not raised (the runs' results landed)."""
        for tenant_id, schedule_id in paused:
            log.warning("schedule %s paused itself: pause_after_failures reached", schedule_id,
                        extra={"schedule_id": str(schedule_id), "tenant_id": str(tenant_id)})
            try:
                with storage_errors("take back a paused schedule's planned runs"):
                    async with self._pool.acquire() as conn, conn.transaction():
                        await unplan_ahead(conn, tenant_id, schedule_id)
            except StorageError:
                log.warning("taking back the planned runs of paused schedule %s failed",
                            schedule_id, exc_info=True)

    async def ended_by_lease(
        self, owner: str, runs: Sequence[LeaseKey]
    ) -> dict[UUID, RunStatus]:
        if not runs:
            return {}
        with storage_errors("read back resolved runs"):
            rows = await self._pool.fetch(Q["job_run_ended_by_lease"], owner, *_keys(runs))
        return {row["id"]: RunStatus(row["status"]) for row in rows}

    async def fail_minimal(
        self, owner: str, run_id: UUID, scheduled_for: datetime, error: str, generation: int
    ) -> bool:
        with storage_errors("fail run"):
            failed: int = await self._pool.fetchval(
                Q["job_run_fail_minimal"], owner, run_id, scheduled_for, error[:500], generation
            )
        return failed == 1

    async def release(self, owner: str, runs: Sequence[LeaseKey]) -> int:
        return await self._give_back(owner, runs, None)

    async def defer(self, owner: str, runs: Sequence[LeaseKey], until: datetime) -> int:
        return await self._give_back(owner, runs, until)

    async def _give_back(
        self, owner: str, runs: Sequence[LeaseKey], until: datetime | None
    ) -> int:
        if not runs:
            return 0
        with storage_errors("release runs" if until is None else "defer runs"):
            given: int = await self._pool.fetchval(
                Q["job_run_give_back"], owner, *_keys(runs), until
            )
        return given
