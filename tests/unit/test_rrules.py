"""RFC 5545 rules as timetables (domain/rrules.py): hand-checked cases, refusals, bounds,
and property tests against dateutil's own expansion (walked from DTSTART, with none of
the restarts, 400-year moves or day-by-day walks cronwire adds) with the contract's DST
rule applied to it here, independently, through zoneinfo.
"""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from dateutil.rrule import rrulestr
from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st

from cronwire.domain.cron import min_gap_seconds, next_occurrences, occurrences_between
from cronwire.domain.errors import InvalidRRule
from cronwire.domain.rrules import HORIZON_YEARS, is_rrule, normalize_rrule, parse_rrule

BER = "Europe/Berlin"
NOW = datetime(2026, 3, 20, 12, 0, tzinfo=UTC)
# The suite's share; CRONWIRE_FULL=1 runs 1,000 (and half as many in DST zones).
CASES = int(os.environ.get("RRULE_EXAMPLES",
                           "1000" if os.environ.get("CRONWIRE_FULL") == "1" else "300"))


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


def fires(rule: str, zone: str, after: str, count: int) -> list[str]:
    text = normalize_rrule(rule, zone, NOW)
    found = next_occurrences(text, zone, utc(after), count)
    return [t.isoformat().replace("+00:00", "Z") for t in found]


# ------------------------------------------------------------------ hand-checked
def test_dtstart_is_local_to_the_zone() -> None:
    rule = "DTSTART:20260401T090000\nRRULE:FREQ=DAILY;COUNT=2"
    assert fires(rule, BER, "2026-01-01T00:00Z", 5) == ["2026-04-01T07:00:00Z",
                                                        "2026-04-02T07:00:00Z"]


def test_dst_gap_fires_at_the_gaps_end_and_fold_once_for_daily_rules() -> None:
    # Berlin, 29 Mar 2026: 02:00 CET -> 03:00 CEST; 25 Oct 2026: 03:00 CEST -> 02:00 CET
    rule = "DTSTART:20260327T023000\nRRULE:FREQ=DAILY"
    assert fires(rule, BER, "2026-03-27T00:00Z", 4) == [
        "2026-03-27T01:30:00Z", "2026-03-28T01:30:00Z", "2026-03-29T01:00:00Z",
        "2026-03-30T00:30:00Z"]
    rule = "DTSTART:20261024T023000\nRRULE:FREQ=DAILY"
    assert fires(rule, BER, "2026-10-24T00:00Z", 3) == [
        "2026-10-24T00:30:00Z", "2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"]


def test_sub_daily_rules_keep_real_time_across_dst() -> None:
    rule = "DTSTART:20261025T000000\nRRULE:FREQ=HOURLY;BYMINUTE=30"
    # 01:30 CEST, 02:30 CEST, 02:30 CET (the repeated hour fires again), 03:30 CET
    assert fires(rule, BER, "2026-10-24T23:00Z", 4) == [
        "2026-10-24T23:30:00Z", "2026-10-25T00:30:00Z", "2026-10-25T01:30:00Z",
        "2026-10-25T02:30:00Z"]
    rule = "DTSTART:20260329T000000\nRRULE:FREQ=HOURLY;BYMINUTE=30"
    # 01:30 CET, then 02:30 does not exist: nothing, then 03:30 CEST
    assert fires(rule, BER, "2026-03-29T00:00Z", 2) == ["2026-03-29T00:30:00Z",
                                                        "2026-03-29T01:30:00Z"]


def test_exdate_and_rdate() -> None:
    rule = ("DTSTART:20260105T090000\nRRULE:FREQ=WEEKLY;BYDAY=MO\n"
            "EXDATE:20260112T090000\nRDATE:20260114T170000")
    assert fires(rule, "UTC", "2026-01-01T00:00Z", 4) == [
        "2026-01-05T09:00:00Z", "2026-01-14T17:00:00Z", "2026-01-19T09:00:00Z",
        "2026-01-26T09:00:00Z"]


def test_utc_times_are_stored_as_local_ones() -> None:
    text = normalize_rrule("DTSTART:20260105T080000Z\nRRULE:FREQ=DAILY;UNTIL=20260107T080000Z",
                           BER, NOW)
    assert text == "DTSTART:20260105T090000\nRRULE:FREQ=DAILY;UNTIL=20260107T090000"
    assert fires(text, BER, "2026-01-01T00:00Z", 5) == [
        "2026-01-05T08:00:00Z", "2026-01-06T08:00:00Z", "2026-01-07T08:00:00Z"]


def test_a_missing_dtstart_is_midnight_of_the_day_given() -> None:
    text = normalize_rrule("RRULE:FREQ=WEEKLY;BYDAY=MO;BYHOUR=9", BER, NOW)
    assert text.startswith("DTSTART:20260320T000000\n")
    assert normalize_rrule(text, BER, NOW + timedelta(days=30)) == text  # idempotent


def test_tzid_of_the_schedules_zone_is_accepted() -> None:
    text = normalize_rrule("DTSTART;TZID=Europe/Berlin:20260105T090000\nRRULE:FREQ=DAILY",
                           BER, NOW)
    assert text == "DTSTART:20260105T090000\nRRULE:FREQ=DAILY"


def test_last_weekday_of_the_month_and_nth_weekday() -> None:
    rule = "DTSTART:20260101T090000\nRRULE:FREQ=MONTHLY;BYDAY=MO,TU,WE,TH,FR;BYSETPOS=-1"
    # Jan 2026 ends on a Saturday -> Fri 30th; Feb on a Saturday -> Fri 27th
    assert fires(rule, "UTC", "2026-01-01T00:00Z", 2) == ["2026-01-30T09:00:00Z",
                                                          "2026-02-27T09:00:00Z"]


def test_is_rrule_tells_the_two_timetables_apart() -> None:
    assert is_rrule("DTSTART:20260101T000000\nRRULE:FREQ=DAILY")
    assert is_rrule("rrule:freq=daily")
    assert not is_rrule("0 0 L * *")


@pytest.mark.parametrize(("rule", "why"), [
    ("", "non-empty"),
    ("FREQ=DAILY", "no ':'"),
    ("RRULE:FREQ=DAILY\nRRULE:FREQ=WEEKLY", "exactly one RRULE"),
    ("DTSTART:20260101T000000", "exactly one RRULE"),
    ("RRULE:FREQ=FORTNIGHTLY", "FREQ must be"),
    ("RRULE:FREQ=DAILY;COUNT=3;UNTIL=20270101T000000", "not both"),
    ("RRULE:FREQ=DAILY;COUNT=0", "COUNT must be"),
    ("RRULE:FREQ=DAILY;COUNT=10001", "COUNT must be"),
    ("RRULE:FREQ=DAILY;INTERVAL=0", "INTERVAL"),
    ("RRULE:FREQ=DAILY;BYDAY=XX", "BYDAY"),
    ("RRULE:FREQ=DAILY;BYDAY=1MO", "ordinal"),
    ("RRULE:FREQ=DAILY;FOO=1", "unsupported RRULE part"),
    ("RRULE:FREQ=DAILY;BYHOUR=25", "dateutil refused"),
    ("EXRULE:FREQ=DAILY\nRRULE:FREQ=DAILY", "unsupported line"),
    ("DTSTART;TZID=America/New_York:20260101T000000\nRRULE:FREQ=DAILY", "TZID"),
    ("RRULE:FREQ=DAILY\nEXDATE;VALUE=DATE:20260101", "calendar"),
    ("DTSTART:20260230T000000\nRRULE:FREQ=DAILY", "not a real date-time"),
    ("DTSTART:2026-01-01\nRRULE:FREQ=DAILY", "not a date-time"),
    ("RRULE:FREQ=DAILY\nEXDATE:" + ",".join(["20260101T000000"] * 1001), "at most"),
    ("RRULE:FREQ=MINUTELY;BYMONTH=2;COUNT=5", "UNTIL instead"),
    ("RRULE:FREQ=DAILY;" + "X" * 9000, "at most"),
])
def test_refusals_name_the_rule(rule: str, why: str) -> None:
    with pytest.raises(InvalidRRule) as info:
        normalize_rrule(rule, BER, NOW)
    assert str(info.value).startswith("rrule: ")
    assert why in str(info.value)


def test_stored_rules_hold_local_times_only() -> None:
    with pytest.raises(InvalidRRule, match="local times only"):
        parse_rrule("DTSTART:20260101T000000Z\nRRULE:FREQ=DAILY")


# ------------------------------------------------------------------------ bounds
@pytest.mark.parametrize("rule", [
    "RRULE:FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=30",
    "RRULE:FREQ=DAILY;BYMONTH=4;BYMONTHDAY=31",
    "RRULE:FREQ=SECONDLY;BYMONTH=2;BYMONTHDAY=30",
    "RRULE:FREQ=MINUTELY;BYMONTH=2;BYMONTHDAY=30;BYHOUR=1",
    "RRULE:FREQ=DAILY;INTERVAL=7;BYDAY=MO",  # DTSTART a Friday: only Fridays, never Monday
    "RRULE:FREQ=MONTHLY;BYMONTHDAY=31;BYMONTH=4",
])
def test_a_rule_that_never_fires_is_found_out_quickly(rule: str) -> None:
    text = normalize_rrule(rule, "UTC", NOW)  # NOW is a Friday
    started = time.perf_counter()
    assert next_occurrences(text, "UTC", NOW, 1) == []
    # plain dateutil walks these to the year 9999: 2 to 75 s each on this machine
    assert time.perf_counter() - started < 2.0


def test_a_sparse_sub_daily_rule_is_walked_a_year_at_a_time() -> None:
    text = normalize_rrule("RRULE:FREQ=MINUTELY;BYMONTH=2;BYMONTHDAY=29;BYHOUR=1", "UTC", NOW)
    started = time.perf_counter()
    got = occurrences_between(text, "UTC", NOW, utc("2033-01-01T00:00Z"), 1000)
    assert len(got) == 2 * 60  # 2028, 2032
    assert got[0] == utc("2028-02-29T01:00Z") and got[-1] == utc("2032-02-29T01:59Z")
    assert time.perf_counter() - started < 2.0


def test_min_gap_is_the_rules_densest() -> None:
    text = normalize_rrule("RRULE:FREQ=SECONDLY;INTERVAL=5", "UTC", NOW)
    assert min_gap_seconds(text, "UTC", NOW) == 5


def test_nothing_is_returned_beyond_the_horizon() -> None:
    # Friday 29 February: 2036, then 2064 -- beyond the horizon from 2037
    text = normalize_rrule("RRULE:FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=29;BYDAY=FR", "UTC", NOW)
    assert next_occurrences(text, "UTC", NOW, 1) == [utc("2036-02-29T00:00Z")]
    assert HORIZON_YEARS < 2064 - 2037
    assert next_occurrences(text, "UTC", utc("2037-01-01T00:00Z"), 1) == []


# ------------------------------------------------------ properties against dateutil
def _settings(examples: int) -> settings:
    return settings(max_examples=examples, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow])


DAYS = ["MO", "TU", "WE", "TH", "FR", "SA", "SU"]


@st.composite
def rules(draw: st.DrawFn) -> str:
    """Rules that fire at least every few years (the oracle walks them from DTSTART)."""
    freq = draw(st.sampled_from(["YEARLY", "MONTHLY", "WEEKLY", "DAILY", "HOURLY",
                                 "MINUTELY", "SECONDLY"]))
    parts = [f"FREQ={freq}"]
    if draw(st.booleans()):
        parts.append(f"INTERVAL={draw(st.integers(1, 5))}")
    coarse = freq in ("YEARLY", "MONTHLY", "WEEKLY", "DAILY")
    if draw(st.booleans()):
        parts.append("BYMONTH=" + ",".join(map(str, sorted(draw(
            st.sets(st.integers(1, 12), min_size=3, max_size=12))))))
    if coarse and draw(st.booleans()):
        parts.append("BYMONTHDAY=" + ",".join(map(str, sorted(draw(
            st.sets(st.sampled_from([1, 2, 10, 15, 28, -1, -2]), min_size=1, max_size=3))))))
    elif draw(st.booleans()):
        days = draw(st.sets(st.sampled_from(DAYS), min_size=2, max_size=7))
        ordinal = freq in ("MONTHLY", "YEARLY") and draw(st.booleans())
        parts.append("BYDAY=" + ",".join(
            (f"{draw(st.sampled_from([1, 2, -1]))}{d}" if ordinal else d) for d in sorted(days)))
    if freq not in ("MINUTELY", "SECONDLY") and draw(st.booleans()):
        parts.append("BYHOUR=" + ",".join(map(str, sorted(draw(
            st.sets(st.sampled_from([0, 1, 2, 3, 9, 23]), min_size=1, max_size=3))))))
    if freq != "SECONDLY" and draw(st.booleans()):
        parts.append("BYMINUTE=" + ",".join(map(str, sorted(draw(
            st.sets(st.sampled_from([0, 15, 30, 59]), min_size=1, max_size=2))))))
    if coarse and "BYDAY" in "".join(parts) and draw(st.booleans()):
        parts.append(f"BYSETPOS={draw(st.sampled_from([1, -1]))}")  # never empty
    if draw(st.booleans()):
        parts.append(f"WKST={draw(st.sampled_from(DAYS))}")
    span = {"SECONDLY": 3600, "MINUTELY": 86400 * 3, "HOURLY": 86400 * 30}.get(
        freq, 86400 * 365 * 5)
    start = datetime(2026, 1, 1) + timedelta(seconds=draw(st.integers(0, span)))
    day_level = any(p.startswith(("BYMONTH", "BYDAY")) for p in parts)
    if draw(st.integers(0, 4)) == 0 and (coarse or not day_level):  # refused otherwise
        parts.append(f"COUNT={draw(st.integers(1, 40))}")
    return f"DTSTART:{start:%Y%m%dT%H%M%S}\nRRULE:" + ";".join(parts)


def _oracle_local(text: str, after_local: datetime, count: int) -> list[datetime]:
    """dateutil's own expansion, walked from DTSTART, local naive times."""
    rule = rrulestr(text)
    lo, hi = after_local - timedelta(hours=3), after_local + timedelta(hours=3)  # DST moves
    found: list[datetime] = []
    beyond = 0
    for d in rule:
        if d > lo:
            found.append(d)
            beyond += d > hi
            if beyond > count:
                break
    return found


def _transition_after(tz: ZoneInfo, lo: datetime, hi: datetime) -> datetime:
    """The first UTC instant in (lo, hi] whose offset differs from lo's (whole seconds)."""
    base = lo.astimezone(tz).utcoffset()
    while hi - lo > timedelta(seconds=1):
        mid = lo + (hi - lo) / 2
        mid = mid.replace(microsecond=0)
        if mid.astimezone(tz).utcoffset() == base:
            lo = mid
        else:
            hi = mid
    return hi


def contract_instants(local: datetime, tz: ZoneInfo, wall_clock: bool) -> list[datetime]:
    """The contract's DST rule for one local time, from zoneinfo alone."""
    first = local.replace(tzinfo=tz, fold=0).astimezone(UTC)
    second = local.replace(tzinfo=tz, fold=1).astimezone(UTC)
    exists = first.astimezone(tz).replace(tzinfo=None) == local
    if first == second:
        return [first]
    if not exists:  # a gap: fold=0 reads it with the earlier offset, landing after it
        return [_transition_after(tz, min(first, second), max(first, second))] if wall_clock else []
    earlier, later = sorted((first, second))
    return [earlier] if wall_clock else [earlier, later]


def oracle(text: str, zone: str, after: datetime, count: int) -> list[datetime]:
    tz = ZoneInfo(zone)
    wall = "FREQ=HOURLY" not in text and "FREQ=MINUTELY" not in text \
        and "FREQ=SECONDLY" not in text
    after_local = after.astimezone(tz).replace(tzinfo=None)
    instants = sorted({i for local in _oracle_local(text, after_local, count)
                       for i in contract_instants(local, tz, wall)})
    return [i for i in instants if i > after][:count]


@_settings(CASES)
@given(rule=rules(), offset=st.integers(-86400 * 30, 86400 * 365 * 3), count=st.integers(1, 12))
def test_rules_equal_dateutils_expansion_in_utc(rule: str, offset: int, count: int) -> None:
    text = _accepted(rule, "UTC")
    start = parse_rrule(text).rule._dtstart
    after = start.replace(tzinfo=UTC) + timedelta(seconds=_reachable(rule, offset))
    got = next_occurrences(text, "UTC", after, count)
    want = oracle(text, "UTC", after, count)
    _agree(got, want, after, (rule, after))


def _reachable(rule: str, offset: int) -> int:
    """``offset`` kept within what the oracle can walk to from DTSTART in a moment (it
    steps through every second of a SECONDLY rule)."""
    for freq, most in (("SECONDLY", 3 * 3600), ("MINUTELY", 3 * 86400), ("HOURLY", 90 * 86400)):
        if f"FREQ={freq}" in rule:
            return offset % most if offset > 0 else offset
    return offset


def _accepted(rule: str, zone: str) -> str:
    try:
        return normalize_rrule(rule, zone, NOW)
    except InvalidRRule as exc:
        assert "dateutil refused" in str(exc), (rule, exc)  # an empty BYxxx set, say
        reject()
        raise


def _agree(got: list[datetime], want: list[datetime], after: datetime, what: object) -> None:
    assert got == want[: len(got)], what
    if len(got) < len(want):  # only past the horizon
        last = got[-1] if got else after
        assert want[len(got)] > last + timedelta(days=365 * HORIZON_YEARS - 2), what


DST_ZONES = ["Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "America/Santiago"]


@_settings(CASES // 2)
@given(rule=rules(), zone=st.sampled_from(DST_ZONES),
       offset=st.integers(-86400 * 3, 86400 * 400), count=st.integers(1, 12))
def test_rules_follow_the_contracts_dst_rule(
    rule: str, zone: str, offset: int, count: int
) -> None:
    text = _accepted(rule, zone)
    start = parse_rrule(text).rule._dtstart
    after = start.replace(tzinfo=ZoneInfo(zone)).astimezone(UTC) + timedelta(
        seconds=_reachable(rule, offset))
    got = next_occurrences(text, zone, after, count)
    _agree(got, oracle(text, zone, after, count), after, (rule, zone, after))
