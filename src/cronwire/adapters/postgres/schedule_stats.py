"""StatsReader on Postgres: the window from kept summaries of its closed days and hours
plus a scan of the rest, its skips by reason, in one snapshot; one look past the window
(ADR 0036).

The snapshot's rows are read first, then the connection goes back to the pool and the
histograms are built and merged in the API's CPU lane (ADR 0055): a 30-day window of a busy
schedule is hundreds of thousands of rows to bucket, never on the event loop and never
while a connection waits."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial
from uuid import UUID

import asyncpg

from cronwire.adapters.postgres.driver_errors import storage_errors
from cronwire.adapters.postgres.sql import queries
from cronwire.domain.planning import MISFIRE_TOLERANCE
from cronwire.domain.stats import SKIP_REASONS, Percentiles, ScheduleStats
from cronwire.domain.stats_summary import (
    DAY,
    HOUR,
    Period,
    RunSummary,
    closed_periods,
    merged,
    percentiles,
    spans_to_scan,
)
from cronwire.ports import CpuWork, OnTheLoop

Q = queries()

# A closed day with fewer finished runs is cheaper to scan than to keep (an hour: 1/24th).
KEEP_MIN_RUNS = 1_000
# Bound on the kept summaries' histogram buckets, all schedules together (a bucket is a
# float key and an int count in a dict: about 100 bytes; 200,000 of them ~ 20 MB).
KEEP_MAX_BUCKETS = 200_000

_LAG, _DURATION, _STATUS = 5, 6, 3  # job_run_stats_values' kinds (GROUPING bitmasks)


class KeptPeriods:
    """Summaries of closed periods, and of the sets of them a window merges (merging ~30
    days' histograms per request cost more than the scan it saves), least recently used
    dropped first, bounded by buckets. A closed period's runs do not change
    (domain.stats_summary.closed_periods), so a summary never goes stale; one that falls
    out of retention is no longer asked for.

    Read on the event loop and filled in the CPU lane's thread, hence the lock; it is held
    for dictionary steps only, never while a summary is computed."""

    def __init__(self, max_buckets: int = KEEP_MAX_BUCKETS) -> None:
        self._entries: OrderedDict[tuple[UUID, tuple[Period, ...]], RunSummary] = (
            OrderedDict())
        self._buckets = 0
        self._single = 0
        self._max_buckets = max_buckets
        self._lock = threading.Lock()

    def get(self, schedule_id: UUID, period: Period) -> RunSummary | None:
        return self._get((schedule_id, (period,)))

    def put(self, schedule_id: UUID, period: Period, summary: RunSummary) -> None:
        self._put((schedule_id, (period,)), summary)

    def merged(self, schedule_id: UUID, parts: dict[Period, RunSummary]) -> RunSummary:
        """Kept periods' summaries merged (the parts are never changed)."""
        key = (schedule_id, tuple(sorted(parts)))
        found = self._get(key)
        if found is None:
            found = merged(parts.values())
            self._put(key, found)
        return found

    def _get(self, key: tuple[UUID, tuple[Period, ...]]) -> RunSummary | None:
        with self._lock:
            summary = self._entries.get(key)
            if summary is not None:
                self._entries.move_to_end(key)
            return summary

    def _put(self, key: tuple[UUID, tuple[Period, ...]], summary: RunSummary) -> None:
        with self._lock:
            if key in self._entries:
                return
            self._entries[key] = summary
            self._buckets += _size(summary)
            self._single += len(key[1]) == 1
            while self._buckets > self._max_buckets and self._entries:
                (_, periods), dropped = self._entries.popitem(last=False)
                self._buckets -= _size(dropped)
                self._single -= len(periods) == 1

    def __len__(self) -> int:
        """How many single periods are kept."""
        return self._single

    def periods(self, schedule_id: UUID) -> list[Period]:
        """The single periods kept for a schedule (for tests and operators' curiosity)."""
        with self._lock:
            keys = list(self._entries)
        return sorted(p[0] for (s, p) in keys if s == schedule_id and len(p) == 1)


def _size(summary: RunSummary) -> int:
    return len(summary.lag_ms) + len(summary.duration_ms) + 1


def _rounded(p: Percentiles) -> Percentiles:
    return Percentiles(*(None if v is None else round(v, 3) for v in (p.p50, p.p95, p.p99)))


def _summaries(rows: Sequence[asyncpg.Record]) -> dict[datetime, RunSummary]:
    """Per-period summaries (days or hours) of job_run_stats_values' rows. Pure CPU: runs
    in the lane, on rows already read."""
    periods: dict[datetime, RunSummary] = {}
    for row in rows:
        summary = periods.setdefault(row["period"], RunSummary())
        if row["kind"] == _STATUS:
            summary.add_status(row["status"], row["runs"])
        elif row["kind"] == _LAG and row["lag_ms"] is not None:
            summary.add_lag(row["lag_ms"], row["runs"])
        elif row["kind"] == _DURATION and row["duration_ms"] is not None:
            summary.add_duration(float(row["duration_ms"]), row["runs"])
    return periods


@dataclass(frozen=True, slots=True)
class _WindowRead:
    """What one snapshot read of a window: its closed periods, those already kept, and
    the raw rows of each span scanned (by its period length)."""

    closed: list[Period]
    kept: dict[Period, RunSummary]
    scans: list[tuple[timedelta, list[asyncpg.Record]]]
    unfinished: int


@dataclass(frozen=True, slots=True)
class _Totals:
    counts: dict[str, int]
    fire_lag_ms: Percentiles
    duration_ms: Percentiles


class PostgresStatsReader:
    def __init__(self, pool: asyncpg.Pool, kept: KeptPeriods | None = None, *,
                 cpu: CpuWork | None = None) -> None:
        self._pool = pool
        self.kept = KeptPeriods() if kept is None else kept
        self._cpu = cpu or OnTheLoop()

    async def schedule_stats(self, tenant_id: UUID, schedule_id: UUID, window: str,
                             window_seconds: int) -> ScheduleStats:
        seconds = float(window_seconds)
        with storage_errors("reading schedule stats"):
            async with self._pool.acquire() as conn:
                # One snapshot: which periods are closed, and the runs of the others.
                async with conn.transaction(isolation="repeatable_read", readonly=True):
                    read = await self._read_window(conn, tenant_id, schedule_id, seconds)
                    # Skips by reason (overlap or misfire) read only the skipped runs' rows.
                    reasons = await conn.fetch(Q["job_run_stats_skipped"], schedule_id,
                                               seconds)
                    streak = await conn.fetchrow(Q["job_run_outcome_streak"], schedule_id)
        assert streak is not None  # aggregates always answer one row
        # The connection is back in the pool: the histograms are built in the lane.
        total = await self._cpu.run(partial(self._totals, schedule_id, read))
        counts = total.counts
        skipped = dict.fromkeys(SKIP_REASONS, 0)
        skipped.update((r["reason"], r["runs"]) for r in reasons)
        return ScheduleStats(
            window=window,
            occurrences=sum(counts.values()) + read.unfinished,
            succeeded=counts["succeeded"],
            failed=counts["failed"], cancelled=counts["cancelled"], skipped=skipped,
            fire_lag_ms=total.fire_lag_ms, duration_ms=total.duration_ms,
            consecutive_failures=streak["consecutive_failures"],
            last_success_at=streak["last_success_at"],
            last_failure_at=streak["last_failure_at"],
        )

    async def _read_window(self, conn: asyncpg.Connection, tenant_id: UUID,
                           schedule_id: UUID, seconds: float) -> _WindowRead:
        """The window's rows not yet summarised, and what is (no summing here)."""
        head = await conn.fetchrow(Q["job_run_stats_open_hours"], tenant_id, schedule_id,
                                   seconds)
        assert head is not None
        now: datetime = head["db_now"]
        start = now - timedelta(seconds=seconds)
        bounds = await conn.fetch(Q["job_run_partition_bounds"])
        retained = min((row["lower_bound"] for row in bounds), default=None)
        closed = closed_periods(start, now, head["open_hours"], head["next_fire_at"],
                                retained)
        kept = {period: s for period in closed
                if (s := self.kept.get(schedule_id, period)) is not None}
        scans = []
        for low, high in spans_to_scan(start, now, kept):
            # By day where the span holds a closed day to keep (the first request), else
            # by hour (the window's first and last day).
            length = DAY if any(p[1] == DAY and low <= p[0] < high for p in closed) else HOUR
            rows = await conn.fetch(Q["job_run_stats_values"], schedule_id, low, high, length,
                                   MISFIRE_TOLERANCE)
            scans.append((length, rows))
        return _WindowRead(closed, kept, scans, head["unfinished"])

    def _totals(self, schedule_id: UUID, read: _WindowRead) -> _Totals:
        """The window's finished runs summed (keeping the closed periods scanned), and
        their percentiles. Runs in the lane."""
        # Days change once a day, hours every hour: merged apart, each merge kept.
        parts = [self.kept.merged(schedule_id, group) for length in (DAY, HOUR)
                 if (group := {p: s for p, s in read.kept.items() if p[1] == length})]
        for length, rows in read.scans:
            scanned = _summaries(rows)
            parts.extend(scanned.values())
            for period in read.closed:
                summary = scanned.get(period[0])
                if (period[1] == length and summary is not None
                        and summary.finished >= KEEP_MIN_RUNS * (length / DAY)):
                    self.kept.put(schedule_id, period, summary)
        total = merged(parts)
        return _Totals(total.counts, _rounded(percentiles(total.lag_ms)),
                       _rounded(percentiles(total.duration_ms)))

    async def retained_since(self) -> datetime | None:
        with storage_errors("reading the oldest run partition"):
            bounds = await self._pool.fetch(Q["job_run_partition_bounds"])
        return min((row["lower_bound"] for row in bounds), default=None)
