"""StatsReader on Postgres: the window from kept summaries of its closed days plus one
scan of the rest, in one snapshot; one look past the window (ADR 0036)."""

from __future__ import annotations

from collections import OrderedDict
from datetime import datetime, timedelta
from uuid import UUID

import asyncpg

from cronwire.adapters.postgres.driver_errors import storage_errors
from cronwire.adapters.postgres.sql import queries
from cronwire.domain.stats import SKIP_REASONS, Percentiles, ScheduleStats
from cronwire.domain.stats_summary import (
    RunSummary,
    closed_days,
    merged,
    percentiles,
    spans_to_scan,
)

Q = queries()

# A closed day with fewer finished runs is cheaper to scan than to keep.
KEEP_MIN_RUNS = 1_000
# Bound on the kept summaries' histogram buckets, all schedules together (a bucket is a
# float key and an int count in a dict: about 100 bytes; 200,000 of them ~ 20 MB).
KEEP_MAX_BUCKETS = 200_000

_LAG, _DURATION, _STATUS = 5, 6, 3  # job_run_stats_values' kinds (GROUPING bitmasks)


class KeptDays:
    """Summaries of closed days, and of the sets of them a window merges (merging ~30
    days' histograms per request cost more than the scan it saves), least recently used
    dropped first, bounded by buckets. A closed day's runs do not change
    (domain.stats_summary.closed_days), so a summary never goes stale; one that falls out
    of retention is no longer asked for."""

    def __init__(self, max_buckets: int = KEEP_MAX_BUCKETS) -> None:
        self._entries: OrderedDict[tuple[UUID, tuple[datetime, ...]], RunSummary] = (
            OrderedDict())
        self._buckets = 0
        self._days = 0
        self._max_buckets = max_buckets

    def get(self, schedule_id: UUID, day: datetime) -> RunSummary | None:
        return self._get((schedule_id, (day,)))

    def put(self, schedule_id: UUID, day: datetime, summary: RunSummary) -> None:
        self._put((schedule_id, (day,)), summary)

    def merged(self, schedule_id: UUID, days: dict[datetime, RunSummary]) -> RunSummary:
        """The kept days' summaries merged (the parts are never changed)."""
        key = (schedule_id, tuple(sorted(days)))
        found = self._get(key)
        if found is None:
            found = merged(days.values())
            self._put(key, found)
        return found

    def _get(self, key: tuple[UUID, tuple[datetime, ...]]) -> RunSummary | None:
        summary = self._entries.get(key)
        if summary is not None:
            self._entries.move_to_end(key)
        return summary

    def _put(self, key: tuple[UUID, tuple[datetime, ...]], summary: RunSummary) -> None:
        if key in self._entries:
            return
        self._entries[key] = summary
        self._buckets += _size(summary)
        self._days += len(key[1]) == 1
        while self._buckets > self._max_buckets and self._entries:
            (_, days), dropped = self._entries.popitem(last=False)
            self._buckets -= _size(dropped)
            self._days -= len(days) == 1

    def __len__(self) -> int:
        """How many single days are kept."""
        return self._days


def _size(summary: RunSummary) -> int:
    return len(summary.lag_ms) + len(summary.duration_ms) + 1


def _rounded(p: Percentiles) -> Percentiles:
    return Percentiles(*(None if v is None else round(v, 3) for v in (p.p50, p.p95, p.p99)))


async def _scan(conn: asyncpg.Connection, schedule_id: UUID, low: datetime,
                high: datetime) -> dict[datetime, RunSummary]:
    """Per-day summaries of the finished runs with scheduled_for in [low, high)."""
    days: dict[datetime, RunSummary] = {}
    for row in await conn.fetch(Q["job_run_stats_values"], schedule_id, low, high):
        summary = days.setdefault(row["day"], RunSummary())
        if row["kind"] == _STATUS:
            summary.add_status(row["status"], row["runs"])
        elif row["kind"] == _LAG and row["lag_ms"] is not None:
            summary.add_lag(row["lag_ms"], row["runs"])
        elif row["kind"] == _DURATION and row["duration_ms"] is not None:
            summary.add_duration(float(row["duration_ms"]), row["runs"])
    return days


class PostgresStatsReader:
    def __init__(self, pool: asyncpg.Pool, kept: KeptDays | None = None) -> None:
        self._pool = pool
        self.kept = KeptDays() if kept is None else kept

    async def schedule_stats(self, tenant_id: UUID, schedule_id: UUID, window: str,
                             window_seconds: int) -> ScheduleStats:
        seconds = float(window_seconds)
        with storage_errors("reading schedule stats"):
            async with self._pool.acquire() as conn:
                # One snapshot: which days are closed, and the runs of the others.
                async with conn.transaction(isolation="repeatable_read", readonly=True):
                    total = await self._window(conn, tenant_id, schedule_id, seconds)
                    unfinished = await conn.fetchval(Q["job_run_stats_unfinished"],
                                                     tenant_id, schedule_id, seconds)
                    streak = await conn.fetchrow(Q["job_run_outcome_streak"], schedule_id)
        assert streak is not None  # aggregates always answer one row
        counts = total.counts
        skipped = dict.fromkeys(SKIP_REASONS, 0)
        skipped["misfire"] = counts["skipped"]  # the only reason a run is skipped today
        return ScheduleStats(
            window=window,
            occurrences=total.finished + unfinished,
            succeeded=counts["succeeded"],
            failed=counts["failed"], cancelled=counts["cancelled"], skipped=skipped,
            fire_lag_ms=_rounded(percentiles(total.lag_ms)),
            duration_ms=_rounded(percentiles(total.duration_ms)),
            consecutive_failures=streak["consecutive_failures"],
            last_success_at=streak["last_success_at"],
            last_failure_at=streak["last_failure_at"],
        )

    async def _window(self, conn: asyncpg.Connection, tenant_id: UUID, schedule_id: UUID,
                      seconds: float) -> RunSummary:
        head = await conn.fetchrow(Q["job_run_stats_open_days"], tenant_id, schedule_id,
                                   seconds)
        assert head is not None
        now: datetime = head["db_now"]
        start = now - timedelta(seconds=seconds)
        bounds = await conn.fetch(Q["job_run_partition_bounds"])
        retained = min((row["lower_bound"] for row in bounds), default=None)
        closed = closed_days(start, now, head["open_days"], head["next_fire_at"], retained)
        kept = {day: s for day in closed
                if (s := self.kept.get(schedule_id, day)) is not None}
        parts = [self.kept.merged(schedule_id, kept)] if kept else []
        for low, high in spans_to_scan(start, now, kept):
            scanned = await _scan(conn, schedule_id, low, high)
            parts.extend(scanned.values())
            for day in closed:
                summary = scanned.get(day)
                if summary is not None and summary.finished >= KEEP_MIN_RUNS:
                    self.kept.put(schedule_id, day, summary)
        return merged(parts)

    async def retained_since(self) -> datetime | None:
        with storage_errors("reading the oldest run partition"):
            bounds = await self._pool.fetch(Q["job_run_partition_bounds"])
        return min((row["lower_bound"] for row in bounds), default=None)
