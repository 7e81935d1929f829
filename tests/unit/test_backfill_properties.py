"""Backfill occurrences are the planner's own: for any window (across DST transitions in
zones north and south, wall-clock and interval crons), the instants a backfill of
``[start, end)`` writes are the ones the planner's decision writes for that window and the
ones the preview lists. Hypothesis searches the windows; the examples pin the nights."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from cronwire.domain.backfill import (
    MAX_BACKFILL,
    BackfillRequest,
    occurrences_in,
    plan_backfill,
)
from cronwire.domain.errors import LimitExceeded, RuleViolation
from cronwire.domain.model import DueSchedule, MisfirePolicy, Target
from cronwire.domain.planning import plan_schedule
from cronwire.domain.schedule_rules import preview
from cronwire.domain.schedules import ScheduleSpec

ZONES = ["Europe/Berlin", "America/New_York", "Australia/Sydney", "America/Santiago",
         "Europe/London", "Asia/Kolkata", "UTC"]
CRONS = ["30 2 * * *", "0 * * * *", "*/15 * * * *", "15 */2 * * *", "0 9,17 * * 1-5",
         "*/20 2 * * *", "30 1 * * *", "0 3 * * 0", "0 0 1 * *", "45 23 * * *"]
# DST changes of 2026 and 2027 in those zones, the nights the hypothesis windows centre on.
NIGHTS = [datetime(2026, 3, 29, 1, tzinfo=UTC), datetime(2026, 10, 25, 1, tzinfo=UTC),
          datetime(2026, 3, 8, 7, tzinfo=UTC), datetime(2026, 11, 1, 6, tzinfo=UTC),
          datetime(2026, 4, 4, 16, tzinfo=UTC), datetime(2026, 10, 3, 16, tzinfo=UTC),
          datetime(2026, 4, 5, 3, tzinfo=UTC), datetime(2026, 9, 6, 4, tzinfo=UTC),
          datetime(2027, 3, 28, 1, tzinfo=UTC), datetime(2027, 10, 31, 1, tzinfo=UTC)]
NOW = datetime(2030, 1, 1, tzinfo=UTC)  # every window is in the past
_TICK = timedelta(microseconds=1)


def spec_of(cron: str, zone: str) -> ScheduleSpec:
    return ScheduleSpec(name="p", cron=cron, timezone=zone, target=Target("https://x.test/"))


def planned(spec: ScheduleSpec, start: datetime, end: datetime) -> list[datetime]:
    """What the planner's pure decision writes for ``[start, end)``: its cursor at the first
    occurrence from ``start`` on, its clock at ``start`` (so nothing counts as missed)."""
    first = preview(spec, start - _TICK, 1)
    if not first or first[0] >= end:
        return []
    assert spec.cron is not None
    due = DueSchedule(id=uuid.uuid4(), tenant_id=uuid.uuid4(), cron=spec.cron,
                      timezone=spec.timezone, misfire_policy=MisfirePolicy.FIRE_ALL,
                      catchup_window_seconds=3600, next_fire_at=first[0], last_fire_at=None,
                      starts_at=None, ends_at=None)
    runs, _ = plan_schedule(due, start, end - _TICK)
    return [run.scheduled_for for run in runs]


def previewed(spec: ScheduleSpec, start: datetime, end: datetime) -> list[datetime]:
    return [at for at in preview(spec, start - _TICK, 1000) if at < end]


@settings(max_examples=300, deadline=None)
@given(cron=st.sampled_from(CRONS), zone=st.sampled_from(ZONES), night=st.sampled_from(NIGHTS),
       before=st.integers(0, 48 * 60), length=st.integers(1, 96 * 60))
@example(cron="30 2 * * *", zone="Europe/Berlin", night=NIGHTS[0], before=24 * 60,
         length=48 * 60)  # the gap: 02:30 does not exist, fires once at 03:00
@example(cron="30 2 * * *", zone="Europe/Berlin", night=NIGHTS[1], before=24 * 60,
         length=48 * 60)  # the fold: 02:30 happens twice, fires once
@example(cron="*/20 2 * * *", zone="Europe/Berlin", night=NIGHTS[1], before=120, length=240)
def test_backfill_is_the_planners_own_timetable_across_dst(
    cron: str, zone: str, night: datetime, before: int, length: int,
) -> None:
    spec = spec_of(cron, zone)
    start = night - timedelta(minutes=before)
    end = start + timedelta(minutes=length)
    found = occurrences_in(spec, start, end, MAX_BACKFILL + 1)
    assert found == planned(spec, start, end)
    assert found == previewed(spec, start, end)
    assert all(start <= at < end for at in found)
    assert len(set(found)) == len(found)


@pytest.mark.parametrize(("day", "expected"), [
    # Spring forward (29 March): 02:30 does not exist, so it fires at 03:00 CEST.
    (datetime(2026, 3, 28, tzinfo=UTC), ["2026-03-28T01:30:00+00:00",
                                          "2026-03-29T01:00:00+00:00",
                                          "2026-03-30T00:30:00+00:00"]),
    # Fall back (25 October): 02:30 happens twice and fires once, at the first.
    (datetime(2026, 10, 24, tzinfo=UTC), ["2026-10-24T00:30:00+00:00",
                                           "2026-10-25T00:30:00+00:00",
                                           "2026-10-26T01:30:00+00:00"]),
])
def test_the_dst_nights_of_a_wall_clock_schedule(day: datetime, expected: list[str]) -> None:
    spec = spec_of("30 2 * * *", "Europe/Berlin")
    found = occurrences_in(spec, day, day + timedelta(days=3), 10)
    assert [at.isoformat() for at in found] == expected


def test_an_interval_schedule_repeats_the_fall_back_hour_and_skips_the_gap() -> None:
    spec = spec_of("0 * * * *", "Europe/Berlin")
    day = timedelta(hours=24)
    # 24 hours of real time hold 24 hourly fires whatever the wall clock did.
    for night in NIGHTS[:2]:
        assert len(occurrences_in(spec, night - timedelta(hours=12), night - timedelta(hours=12)
                                  + day, 100)) == 24


def test_the_limit_and_the_window_rules_name_their_field() -> None:
    spec = spec_of("* * * * * *", "UTC")
    start = datetime(2029, 1, 1, tzinfo=UTC)
    oldest = datetime(2028, 12, 1, tzinfo=UTC)
    ok = plan_backfill(spec, BackfillRequest(start, start + timedelta(seconds=MAX_BACKFILL)),
                       NOW, oldest)
    assert len(ok.occurrences) == MAX_BACKFILL
    with pytest.raises(LimitExceeded) as too_many:
        plan_backfill(spec, BackfillRequest(start, start + timedelta(seconds=MAX_BACKFILL + 1)),
                      NOW, oldest)
    assert (too_many.value.limit, too_many.value.field) == ("max_backfill_occurrences", "end")
    for request, field in [
        (BackfillRequest(start, start), "end"),
        (BackfillRequest(start, NOW + timedelta(seconds=1)), "end"),
        (BackfillRequest(oldest - timedelta(seconds=1), start), "start"),
    ]:
        with pytest.raises(RuleViolation) as refused:
            plan_backfill(spec, request, NOW, oldest)
        assert refused.value.field == field


def test_a_one_time_schedule_backfills_its_instant_only_in_the_window() -> None:
    at = datetime(2029, 5, 5, 5, 5, 5, tzinfo=UTC)
    spec = ScheduleSpec(name="once", cron=None, at=at, target=Target("https://x.test/"))
    assert occurrences_in(spec, at, at + _TICK, 10) == [at]
    assert occurrences_in(spec, at + _TICK, at + timedelta(days=1), 10) == []
    assert occurrences_in(spec, at - timedelta(days=1), at, 10) == []


def test_bounds_of_the_schedule_bound_the_backfill() -> None:
    starts = datetime(2029, 1, 1, 5, tzinfo=UTC)
    ends = datetime(2029, 1, 1, 8, tzinfo=UTC)
    spec = ScheduleSpec(name="b", cron="0 * * * *", target=Target("https://x.test/"),
                        starts_at=starts, ends_at=ends)
    found = occurrences_in(spec, datetime(2029, 1, 1, tzinfo=UTC),
                           datetime(2029, 1, 2, tzinfo=UTC), 100)
    assert found == [starts + timedelta(hours=h) for h in range(4)]
