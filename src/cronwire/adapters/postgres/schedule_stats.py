"""StatsReader on Postgres: one aggregate over the window, its skips by reason, one look
past it."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from uuid import UUID

import asyncpg

from cronwire.adapters.postgres.driver_errors import storage_errors
from cronwire.adapters.postgres.sql import queries
from cronwire.domain.stats import SKIP_REASONS, Percentiles, ScheduleStats

Q = queries()


def _percentiles(values: Sequence[float | None] | None) -> Percentiles:
    if not values:
        return Percentiles()
    p50, p95, p99 = (None if v is None else round(float(v), 3) for v in values)
    return Percentiles(p50, p95, p99)


class PostgresStatsReader:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def schedule_stats(self, tenant_id: UUID, schedule_id: UUID, window: str,
                             window_seconds: int) -> ScheduleStats:
        seconds = float(window_seconds)
        with storage_errors("reading schedule stats"):
            async with self._pool.acquire() as conn:
                row = await conn.fetchrow(Q["job_run_stats_window"], schedule_id, seconds)
                reasons = await conn.fetch(Q["job_run_stats_skipped"], schedule_id, seconds)
                unfinished = await conn.fetchval(Q["job_run_stats_unfinished"], tenant_id,
                                                 schedule_id, seconds)
                streak = await conn.fetchrow(Q["job_run_outcome_streak"], schedule_id)
        assert row is not None and streak is not None  # aggregates always answer one row
        skipped = dict.fromkeys(SKIP_REASONS, 0)
        skipped.update((r["reason"], r["runs"]) for r in reasons)
        return ScheduleStats(
            window=window,
            occurrences=row["succeeded"] + row["failed"] + row["skipped"] + row["cancelled"]
            + unfinished,
            succeeded=row["succeeded"],
            failed=row["failed"], cancelled=row["cancelled"], skipped=skipped,
            fire_lag_ms=_percentiles(row["lag_ms"]),
            duration_ms=_percentiles(row["duration_ms"]),
            consecutive_failures=streak["consecutive_failures"],
            last_success_at=streak["last_success_at"],
            last_failure_at=streak["last_failure_at"],
        )

    async def retained_since(self) -> datetime | None:
        with storage_errors("reading the oldest run partition"):
            bounds = await self._pool.fetch(Q["job_run_partition_bounds"])
        return min((row["lower_bound"] for row in bounds), default=None)
