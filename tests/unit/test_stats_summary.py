"""The stats' mergeable summaries: percentiles from merged histograms against the exact
percentile_disc of the raw values (ADR 0036)."""

from __future__ import annotations

import math
import uuid
from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from cronwire.adapters.postgres.schedule_stats import KeptPeriods
from cronwire.domain.stats_summary import (
    DAY,
    HOUR,
    QUANTILES,
    RELATIVE_ERROR,
    RunSummary,
    bucket,
    closed_periods,
    merged,
    percentile_disc,
    spans_to_scan,
)

# Fire lags can be a little negative (clock reads), durations are whole ms.
values = st.floats(min_value=-1e6, max_value=1e9, allow_nan=False, allow_infinity=False)


def exact_percentile_disc(raw: list[float], q: float) -> float:
    """Postgres's definition, on the raw values."""
    ordered = sorted(raw)
    return ordered[max(math.ceil(q * len(ordered)), 1) - 1]


@given(values)
def test_a_bucket_is_within_the_stated_relative_error(value: float) -> None:
    assert abs(bucket(value) - value) <= RELATIVE_ERROR * abs(value)


@given(values, values)
def test_bucketing_never_reorders_values(a: float, b: float) -> None:
    low, high = sorted((a, b))
    assert bucket(low) <= bucket(high)


@given(st.lists(values, min_size=1, max_size=300), st.integers(min_value=1, max_value=4))
def test_percentiles_of_merged_parts_are_the_rounded_exact_percentiles(
        raw: list[float], parts: int) -> None:
    summaries = []
    for part in range(parts):  # any split of the runs into spans merges to the same answer
        summary = RunSummary()
        for value in raw[part::parts]:
            summary.add_lag(value, 1)
        summaries.append(summary)
    got = percentile_disc(merged(summaries).lag_ms, QUANTILES)
    for q, answer in zip(QUANTILES, got, strict=True):
        exact = exact_percentile_disc(raw, q)
        assert answer == bucket(exact)
        assert answer is not None and abs(answer - exact) <= RELATIVE_ERROR * abs(exact)


def test_values_with_three_significant_digits_are_reported_exactly() -> None:
    summary = RunSummary()
    for value, count in ((10.0, 1), (20.0, 1), (30.0, 1), (40.0, 1), (1250.0, 1)):
        summary.add_duration(value, count)
    assert percentile_disc(summary.duration_ms) == [30.0, 1250.0, 1250.0]
    assert bucket(12.345) == 12.3 and bucket(0.0) == 0.0 and bucket(123456.0) == 123000.0


def test_an_empty_histogram_has_no_percentiles_and_counts_merge() -> None:
    assert percentile_disc({}) == [None, None, None]
    a, b = RunSummary(), RunSummary()
    a.add_status("succeeded", 3)
    b.add_status("succeeded", 2)
    b.add_status("failed", 1)
    total = merged([a, b])
    assert total.counts["succeeded"] == 5 and total.counts["failed"] == 1
    assert total.finished == 6


NOW = datetime(2026, 12, 2, 6, 30, tzinfo=UTC)
START = NOW - timedelta(days=30)
RETAINED = datetime(2026, 10, 1, tzinfo=UTC)


def _at(day: int, hour: int = 0, month: int = 11) -> datetime:
    return datetime(2026, month, day, hour, tzinfo=UTC)


def test_closed_periods_are_whole_days_inside_the_window_and_hours_at_its_edges() -> None:
    periods = closed_periods(START, NOW, [], None, RETAINED)
    days = [p for p, length in periods if length == DAY]
    hours = [p for p, length in periods if length == HOUR]
    # (Nov 2 06:30, Dec 2 06:30]: Nov 3 .. Dec 1 whole; Dec 1 ended 6.5 h ago.
    assert days[0] == _at(3) and days[-1] == _at(1, month=12) and len(days) == 29
    # the first day from 07:00, the last one up to an hour ago
    assert hours == [_at(2, h) for h in range(7, 24)] + [_at(2, h, 12) for h in range(5)]


def test_a_period_with_unfinished_runs_before_the_cursor_or_out_of_retention_is_not_closed(
        ) -> None:
    open_hour = datetime(2026, 11, 20, 13, 5, tzinfo=UTC)  # any instant of that hour
    periods = closed_periods(START, NOW, [open_hour], None, RETAINED)
    assert (_at(20), DAY) not in periods and (_at(20, 13), HOUR) not in periods
    assert (_at(20, 12), HOUR) in periods and (_at(20, 14), HOUR) in periods
    cursor = datetime(2026, 11, 25, 12, 30, tzinfo=UTC)  # occurrences from here not written
    last = closed_periods(START, NOW, [], cursor, RETAINED)[-1]
    assert last == (_at(25, 11), HOUR)
    assert (_at(25), DAY) not in closed_periods(START, NOW, [], cursor, RETAINED)
    assert [p for p in closed_periods(START, NOW, [], None, _at(1, month=12))
            if p[1] == DAY] == [(_at(1, month=12), DAY)]
    assert closed_periods(START, NOW, [], None, None) == []  # no partition: nothing kept


def test_the_spans_to_scan_cover_the_window_less_the_kept_periods() -> None:
    tick = timedelta(microseconds=1)
    kept = [(_at(5), DAY), (_at(4), DAY), (_at(10, 3), HOUR)]
    assert spans_to_scan(START, NOW, kept) == [
        (START + tick, _at(4)),
        (_at(6), _at(10, 3)),
        (_at(10, 4), NOW + tick),
    ]
    assert spans_to_scan(START, NOW, []) == [(START + tick, NOW + tick)]


def test_kept_periods_drop_the_least_recently_used_beyond_their_bucket_budget() -> None:
    def summary(buckets: int) -> RunSummary:
        s = RunSummary()
        for value in range(buckets):
            s.add_lag(float(value + 1), 1)
        return s

    kept = KeptPeriods(max_buckets=25)
    schedule, day = uuid.uuid4(), datetime(2026, 11, 3, tzinfo=UTC)
    kept.put(schedule, (day, DAY), summary(9))  # 10 with its counts
    kept.put(schedule, (day + DAY, DAY), summary(9))
    assert kept.get(schedule, (day, DAY)) is not None  # now the most recent
    kept.put(schedule, (day + 2 * DAY, DAY), summary(9))
    assert kept.get(schedule, (day + DAY, DAY)) is None and len(kept) == 2
    assert kept.get(schedule, (day, DAY)) is not None
    assert kept.get(schedule, (day, HOUR)) is None  # an hour is not its day


def test_the_merge_of_a_set_of_kept_periods_is_kept_and_leaves_its_parts_alone() -> None:
    kept = KeptPeriods()
    schedule, day = uuid.uuid4(), datetime(2026, 11, 3, tzinfo=UTC)
    parts = {}
    for n in range(3):
        part = RunSummary()
        part.add_status("succeeded", n + 1)
        part.add_lag(10.0 * (n + 1), n + 1)
        kept.put(schedule, (day + n * DAY, DAY), part)
        parts[(day + n * DAY, DAY)] = part
    total = kept.merged(schedule, parts)
    assert total.counts["succeeded"] == 6 and total.lag_ms == {10.0: 1, 20.0: 2, 30.0: 3}
    assert kept.merged(schedule, dict(reversed(parts.items()))) is total
    assert parts[(day, DAY)].lag_ms == {10.0: 1} and len(kept) == 3
