"""Calendars on a timetable (domain/calendars.py): skip, next and previous business day
across year ends, leap days and DST transitions, the bounded search, and the effective
timetable against a brute-force walk of every occurrence."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cronwire.domain.calendar_walk import effective_between, effective_next
from cronwire.domain.calendars import MAX_SHIFT_DAYS, CalendarPolicy, Exclusions, verdict
from cronwire.domain.cron import occurrences_between

SKIP, NEXT, PREVIOUS = (CalendarPolicy.SKIP, CalendarPolicy.NEXT_BUSINESS_DAY,
                        CalendarPolicy.PREVIOUS_BUSINESS_DAY)
BERLIN, NEW_YORK = ZoneInfo("Europe/Berlin"), ZoneInfo("America/New_York")


def _excluding(policy: CalendarPolicy, *days: date, name: str = "holidays") -> Exclusions:
    return Exclusions.of(policy, [(name, days)])


def _local(zone: ZoneInfo, *parts: int) -> datetime:
    return datetime(*parts, tzinfo=zone)  # type: ignore[misc]


def test_a_date_no_calendar_lists_fires_as_planned_even_on_a_weekend() -> None:
    saturday = _local(BERLIN, 2026, 12, 26, 9)
    assert verdict(saturday, BERLIN, _excluding(NEXT, date(2026, 12, 25))).at == saturday
    assert not verdict(saturday, BERLIN, _excluding(NEXT, date(2026, 12, 25))).shifted


def test_skip_keeps_the_instant_and_names_the_calendar_and_date() -> None:
    christmas = _local(BERLIN, 2026, 12, 25, 9)
    found = verdict(christmas, BERLIN, _excluding(SKIP, date(2026, 12, 25), name="de"))
    assert (found.at, found.skip, found.day, found.calendar) == (
        christmas, True, date(2026, 12, 25), "de")


@pytest.mark.parametrize(("policy", "expected"), [
    # Thu 31 Dec and Fri 1 Jan excluded: forward over the weekend to Mon 4 Jan 2027,
    # backward from 1 Jan over 31 Dec to Wed 30 Dec 2026.
    (NEXT, datetime(2027, 1, 4, 9)),
    (PREVIOUS, datetime(2026, 12, 30, 9)),
])
def test_a_shift_crosses_the_year_end(policy: CalendarPolicy, expected: datetime) -> None:
    exclusions = _excluding(policy, date(2026, 12, 31), date(2027, 1, 1))
    found = verdict(_local(BERLIN, 2027, 1, 1, 9), BERLIN, exclusions)
    assert found.shifted and found.at == expected.replace(tzinfo=BERLIN)
    assert found.day == date(2027, 1, 1)


@pytest.mark.parametrize(("policy", "expected"), [
    (NEXT, date(2028, 3, 1)), (PREVIOUS, date(2028, 2, 28)),
])
def test_a_leap_day_shifts_to_its_neighbours(policy: CalendarPolicy, expected: date) -> None:
    found = verdict(_local(NEW_YORK, 2028, 2, 29, 17, 45), NEW_YORK,
                    _excluding(policy, date(2028, 2, 29)))
    assert found.at == datetime.combine(expected, datetime.min.time()).replace(
        hour=17, minute=45, tzinfo=NEW_YORK)


def test_a_leap_day_excluded_in_a_year_without_one_changes_nothing() -> None:
    # Feb 29 exists only in leap years: a yearly 29 Feb rule in 2028 is shifted, the
    # calendar's dates of other years are not consulted.
    found = verdict(_local(BERLIN, 2027, 2, 28, 9), BERLIN, _excluding(NEXT, date(2028, 2, 29)))
    assert not found.shifted


@pytest.mark.parametrize(("zone", "excluded", "shifted_utc"), [
    # Friday before the spring change: Monday keeps 09:00 local, one hour less UTC offset.
    (BERLIN, datetime(2026, 3, 27, 9), datetime(2026, 3, 30, 7, tzinfo=UTC)),
    (NEW_YORK, datetime(2026, 3, 6, 9), datetime(2026, 3, 9, 13, tzinfo=UTC)),
    # Friday before the autumn change: Monday keeps 09:00 local, one hour more.
    (BERLIN, datetime(2026, 10, 23, 9), datetime(2026, 10, 26, 8, tzinfo=UTC)),
    (NEW_YORK, datetime(2026, 10, 30, 9), datetime(2026, 11, 2, 14, tzinfo=UTC)),
])
def test_a_shift_over_a_dst_change_keeps_the_wall_clock(zone: ZoneInfo, excluded: datetime,
                                                         shifted_utc: datetime) -> None:
    found = verdict(excluded.replace(tzinfo=zone), zone, _excluding(NEXT, excluded.date()))
    assert found.at == shifted_utc
    assert found.at.astimezone(zone).hour == 9


def test_a_backward_shift_over_a_dst_change_keeps_the_wall_clock() -> None:
    # Monday after the spring change excluded: back to Friday 09:00 CET (08:00 UTC).
    found = verdict(_local(BERLIN, 2026, 3, 30, 9), BERLIN, _excluding(PREVIOUS, date(2026, 3, 30)))
    assert found.at == datetime(2026, 3, 27, 8, tzinfo=UTC)


def test_a_shifted_time_in_a_gap_fires_at_the_gap_end() -> None:
    # Jerusalem springs forward on Friday 27 March 2026 at 02:00 (to 03:00): Thursday's
    # 02:30 moved to Friday is in the gap, so it fires at the transition (00:00 UTC).
    jerusalem = ZoneInfo("Asia/Jerusalem")
    found = verdict(_local(jerusalem, 2026, 3, 26, 2, 30), jerusalem,
                    _excluding(NEXT, date(2026, 3, 26)))
    assert found.at == datetime(2026, 3, 27, 0, 0, tzinfo=UTC)


def test_a_shifted_time_in_a_fold_fires_at_its_first_pass() -> None:
    # Cairo falls back on Thursday 29 October 2026 at 24:00 (to 23:00): 23:30 happens
    # twice; the wall-clock rule takes the first (+03:00, 20:30 UTC).
    cairo = ZoneInfo("Africa/Cairo")
    found = verdict(_local(cairo, 2026, 10, 28, 23, 30), cairo,
                    _excluding(NEXT, date(2026, 10, 28)))
    assert found.at == datetime(2026, 10, 29, 20, 30, tzinfo=UTC)


def test_no_business_day_within_reach_skips_instead_of_looping() -> None:
    start = date(2026, 1, 1)
    every_day = [start + timedelta(days=i) for i in range(400)]
    for policy in (NEXT, PREVIOUS):
        found = verdict(_local(BERLIN, 2026, 6, 1, 9), BERLIN, _excluding(policy, *every_day))
        assert found.skip and not found.shifted
    # Within reach: the day after MAX_SHIFT_DAYS excluded days in a row is found.
    run = [date(2026, 6, 1) + timedelta(days=i) for i in range(MAX_SHIFT_DAYS)]
    found = verdict(_local(BERLIN, 2026, 6, 1, 9), BERLIN, _excluding(NEXT, *run))
    assert found.shifted and found.at.astimezone(BERLIN).date() > run[-1]


def test_a_shift_onto_an_occurrence_of_its_own_is_one_instant() -> None:
    # Daily 09:00; Thu 24 and Fri 25 Dec move to Mon 28 Dec, which fires anyway: one run.
    exclusions = _excluding(NEXT, date(2026, 12, 24), date(2026, 12, 25))
    fires = effective_next("0 9 * * *", "Europe/Berlin", datetime(2026, 12, 23, 9, tzinfo=UTC),
                           6, exclusions)
    assert [f.astimezone(BERLIN).day for f in fires] == [26, 27, 28, 29, 30, 31]


def test_skip_policy_keeps_every_occurrence_in_the_timetable() -> None:
    exclusions = _excluding(SKIP, date(2026, 12, 25))
    assert effective_next("0 9 * * FRI", "Europe/Berlin", datetime(2026, 12, 1, tzinfo=UTC), 5,
                          exclusions) == occurrences_between(
        "0 9 * * FRI", "Europe/Berlin", datetime(2026, 12, 1, tzinfo=UTC),
        datetime(2027, 2, 1, tzinfo=UTC), 5)


def _brute_force(cron: str, zone: str, after: datetime, until: datetime,
                 exclusions: Exclusions) -> list[datetime]:
    """Every occurrence from MAX_SHIFT_DAYS + 2 days either side, each mapped, sorted."""
    margin = timedelta(days=MAX_SHIFT_DAYS + 2)
    raw = occurrences_between(cron, zone, after - margin, until + margin, 1_000_000)
    tz = ZoneInfo(zone)
    return sorted({v.at for v in (verdict(t, tz, exclusions) for t in raw)
                   if after < v.at <= until})


CRONS = ("0 9 * * *", "30 2 * * *", "0 9 * * FRI", "15 8,17 * * 1-5", "0 0 1 * *",
         "0 12 L * *", "0 */6 * * *", "*/20 * * * *")
ZONES = ("Europe/Berlin", "America/New_York", "UTC", "Asia/Jerusalem")


@settings(max_examples=200, deadline=None)
@given(cron=st.sampled_from(CRONS), zone=st.sampled_from(ZONES),
       policy=st.sampled_from(list(CalendarPolicy)),
       offsets=st.lists(st.integers(0, 120), max_size=40),
       start=st.integers(0, 90), span=st.integers(1, 60), limit=st.integers(1, 50))
def test_the_effective_timetable_matches_a_brute_force_walk(
        cron: str, zone: str, policy: CalendarPolicy, offsets: list[int], start: int,
        span: int, limit: int) -> None:
    # Dates around the turn of 2027/2028 (a year end and a leap day) and the DST changes.
    base = date(2027, 12, 1)
    exclusions = _excluding(policy, *(base + timedelta(days=o) for o in offsets))
    after = datetime(2027, 12, 1, tzinfo=UTC) + timedelta(days=start, hours=start % 24)
    until = after + timedelta(days=span)
    expected = _brute_force(cron, zone, after, until, exclusions)
    assert effective_between(cron, zone, after, until, limit, exclusions) == expected[:limit]
    assert effective_next(cron, zone, after, limit, exclusions, ends_at=until) == expected[:limit]
