"""Mergeable summaries of runs for the stats (pure; ADR 0036).

A summary holds exact counts by status and two histograms (fire lag, duration) whose
buckets are the values rounded to ``SIGNIFICANT_DIGITS`` significant digits. Summaries of
disjoint spans of a window merge by adding, so a closed day's summary can be kept and the
window answered from kept days plus a scan of the rest.

Rounding to a fixed number of significant digits never reorders values (it is monotone),
so the percentile read from the merged histogram is exactly the rounded percentile of
the raw values: its relative error is at most ``RELATIVE_ERROR`` (half a unit in the
third digit over the smallest three-digit mantissa, 0.5 / 100), and a value that already
has three or fewer significant digits (20 ms, 400 ms, 1.25 s) is reported exactly.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from cronwire.domain.stats import Percentiles

SIGNIFICANT_DIGITS = 3
RELATIVE_ERROR = 0.005
QUANTILES = (0.5, 0.95, 0.99)
FINISHED = ("succeeded", "failed", "skipped", "cancelled")


def bucket(value: float) -> float:
    """``value`` rounded to three significant digits (the histogram's key)."""
    return float(format(value, f".{SIGNIFICANT_DIGITS}g"))


@dataclass(slots=True)
class RunSummary:
    """Finished runs of one span: counts by status and the two histograms."""

    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(FINISHED, 0))
    lag_ms: dict[float, int] = field(default_factory=dict)
    duration_ms: dict[float, int] = field(default_factory=dict)

    @property
    def finished(self) -> int:
        return sum(self.counts.values())

    def add_status(self, status: str, count: int) -> None:
        self.counts[status] = self.counts.get(status, 0) + count

    def add_lag(self, value: float, count: int) -> None:
        _add(self.lag_ms, bucket(value), count)

    def add_duration(self, value: float, count: int) -> None:
        _add(self.duration_ms, bucket(value), count)

    def merge(self, other: RunSummary) -> None:
        for status, count in other.counts.items():
            self.add_status(status, count)
        for key, count in other.lag_ms.items():
            _add(self.lag_ms, key, count)
        for key, count in other.duration_ms.items():
            _add(self.duration_ms, key, count)


def _add(histogram: dict[float, int], key: float, count: int) -> None:
    histogram[key] = histogram.get(key, 0) + count


def merged(summaries: Iterable[RunSummary]) -> RunSummary:
    total = RunSummary()
    for summary in summaries:
        total.merge(summary)
    return total


def percentile_disc(histogram: Mapping[float, int], quantiles: Iterable[float] = QUANTILES,
                    ) -> list[float | None]:
    """Postgres's ``percentile_disc`` over the values a histogram counts: for each q, the
    first value whose position in the ordering reaches q of the count (the row number is
    ``ceil(q * n)`` in float arithmetic, as Postgres computes it). None when empty."""
    keys = sorted(k for k, c in histogram.items() if c > 0)
    total = sum(histogram[k] for k in keys)
    if total == 0:
        return [None for _ in quantiles]
    answers: list[float | None] = []
    for q in quantiles:
        row = max(math.ceil(q * total), 1)
        seen = 0
        for key in keys:
            seen += histogram[key]
            if seen >= row:
                answers.append(key)
                break
    return answers


def percentiles(histogram: Mapping[float, int]) -> Percentiles:
    p50, p95, p99 = percentile_disc(histogram, QUANTILES)
    return Percentiles(p50, p95, p99)


# Periods are UTC days, and UTC hours where no whole closed day covers them (the window's
# first and last day); a closed period's summary can be kept (ADR 0036).
DAY = timedelta(days=1)
HOUR = timedelta(hours=1)
# A period must have ended this long ago: the margin covers clocks (a manual run takes the
# primary's clock_timestamp(); a standby's now() trails it).
CLOSED_AFTER = timedelta(hours=1)

Period = tuple[datetime, timedelta]  # start (a UTC midnight or hour) and length


def hour_of(instant: datetime) -> datetime:
    return instant.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


def closed_periods(start: datetime, now: datetime, open_hours: Iterable[datetime],
                   next_fire_at: datetime | None, retained_since: datetime | None,
                   ) -> list[Period]:
    """The periods wholly inside the window ``(start, now]`` whose finished runs can no
    longer change: ended ``CLOSED_AFTER`` ago, no run of theirs still pending, retrying or
    running (a finished run is never reopened), every occurrence in them already written
    (the planner's cursor ``next_fire_at`` is past their end, or nothing more fires), and
    their partition still retained. Whole days where they are closed, else their closed
    hours. Anything else may still gain or lose runs."""
    if retained_since is None:
        return []
    still_open = sorted({hour_of(h) for h in open_hours})

    def closed(low: datetime, length: timedelta) -> bool:
        high = low + length
        # The first open hour at or after low (a bisection: a backlog can hold every hour
        # of a 30-day window open, and a scan per period made that quadratic).
        first_open = bisect.bisect_left(still_open, low)
        return (high <= now - CLOSED_AFTER and low >= retained_since
                and (next_fire_at is None or next_fire_at >= high)
                and not (first_open < len(still_open) and still_open[first_open] < high))

    periods: list[Period] = []
    hour = hour_of(start) + HOUR  # the first whole hour after start
    while hour + HOUR <= now - CLOSED_AFTER:
        if hour.hour == 0 and closed(hour, DAY):
            periods.append((hour, DAY))
            hour += DAY
            continue
        if closed(hour, HOUR):
            periods.append((hour, HOUR))
        hour += HOUR
    return periods


def spans_to_scan(start: datetime, now: datetime, kept: Iterable[Period],
                  ) -> list[tuple[datetime, datetime]]:
    """The window ``(start, now]`` less the kept periods, as half-open ``[low, high)``
    spans (timestamps are whole microseconds, so ``(a, b]`` is ``[a + 1 µs, b + 1 µs)``)."""
    tick = timedelta(microseconds=1)
    spans = []
    low = start + tick
    for period_start, length in sorted(kept):
        if period_start > low:
            spans.append((low, period_start))
        low = max(low, period_start + length)
    if now + tick > low:
        spans.append((low, now + tick))
    return spans
