"""Table tests for cronwire.domain.cron: DST days with explicit UTC instants.

Transitions used (2026):
- Europe/Berlin: spring 29 Mar 01:00Z (02:00 CET -> 03:00 CEST);
  fall 25 Oct 01:00Z (03:00 CEST -> 02:00 CET, 02:00-02:59 twice).
- America/New_York: spring 8 Mar 07:00Z (02:00 EST -> 03:00 EDT);
  fall 1 Nov 06:00Z (02:00 EDT -> 01:00 EST, 01:00-01:59 twice).
- Australia/Lord_Howe (30-minute DST): fall 4 Apr 15:00Z (02:00 +11 -> 01:30
  +10:30, 01:30-01:59 twice); spring 3 Oct 15:30Z (02:00 +10:30 -> 02:30 +11).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from cronsim import CronSim

from cronwire.domain.cron import (
    load_timezone,
    min_gap_seconds,
    next_occurrences,
    occurrences_between,
    parse_cron,
)
from cronwire.domain.errors import DomainError, InvalidCron, InvalidTimezone


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


BER, NYC, LHI = "Europe/Berlin", "America/New_York", "Australia/Lord_Howe"

CASES = [
    # --- Europe/Berlin, spring forward: wall-clock times in the gap fire at 03:00 CEST
    ("30 2 * * *", BER, "2026-03-28T12:00Z", ["2026-03-29T01:00Z", "2026-03-30T00:30Z"]),
    (
        "0,30 2 * * *",
        BER,
        "2026-03-28T12:00Z",
        ["2026-03-29T01:00Z", "2026-03-30T00:00Z", "2026-03-30T00:30Z"],
    ),  # 02:00, 02:30 collapse
    (
        "30 2,3 * * *",
        BER,
        "2026-03-28T12:00Z",
        ["2026-03-29T01:00Z", "2026-03-29T01:30Z", "2026-03-30T00:30Z"],
    ),
    ("0 9 * * *", BER, "2026-03-28T12:00Z", ["2026-03-29T07:00Z", "2026-03-30T07:00Z"]),
    # interval schedules: real time, nothing inside the skipped hour
    (
        "*/30 * * * *",
        BER,
        "2026-03-29T00:15Z",
        ["2026-03-29T00:30Z", "2026-03-29T01:00Z", "2026-03-29T01:30Z"],
    ),
    (
        "*/20 2 * * *",
        BER,
        "2026-03-28T12:00Z",
        ["2026-03-30T00:00Z", "2026-03-30T00:20Z", "2026-03-30T00:40Z"],
    ),
    (
        "0 */2 * * *",
        BER,
        "2026-03-28T22:30Z",
        ["2026-03-28T23:00Z", "2026-03-29T02:00Z"],
    ),  # 00:00 CET, then 04:00 CEST (02:00 is gone)
    # 6 fields, seconds first; the minute/hour fields decide the rule
    ("0 30 2 * * *", BER, "2026-03-28T12:00Z", ["2026-03-29T01:00Z", "2026-03-30T00:30Z"]),
    (
        "30 30 2 * * *",
        BER,
        "2026-03-28T12:00Z",
        ["2026-03-29T01:00Z", "2026-03-30T00:30:30Z"],
    ),  # substitute is the gap's end, 03:00:00
    (
        "*/20 59 1 * * *",
        BER,
        "2026-03-29T00:00Z",
        [
            "2026-03-29T00:59:00Z",
            "2026-03-29T00:59:20Z",
            "2026-03-29T00:59:40Z",
            "2026-03-29T23:59:00Z",
        ],
    ),
    (
        "*/15 * 2 * * *",
        BER,
        "2026-03-29T00:59:50Z",
        ["2026-03-30T00:00:00Z", "2026-03-30T00:00:15Z"],
    ),
    (
        "*/10 * * * * *",
        BER,
        "2026-03-29T00:59:40Z",
        ["2026-03-29T00:59:50Z", "2026-03-29T01:00:00Z", "2026-03-29T01:00:10Z"],
    ),
    # --- Europe/Berlin, fall back: wall-clock fires at the first 02:30
    ("30 2 * * *", BER, "2026-10-24T12:00Z", ["2026-10-25T00:30Z", "2026-10-26T01:30Z"]),
    (
        "*/30 2 * * *",
        BER,
        "2026-10-24T12:00Z",
        [
            "2026-10-25T00:00Z",
            "2026-10-25T00:30Z",
            "2026-10-25T01:00Z",
            "2026-10-25T01:30Z",
            "2026-10-26T01:00Z",
        ],
    ),
    (
        "0 * * * *",
        BER,
        "2026-10-24T23:30Z",
        ["2026-10-25T00:00Z", "2026-10-25T01:00Z", "2026-10-25T02:00Z"],
    ),
    # `after` in the second pass: the first-pass 02:45 is already in the past
    ("45 2 * * *", BER, "2026-10-25T01:30Z", ["2026-10-26T01:45Z"]),
    ("*/15 2 * * *", BER, "2026-10-25T01:30Z", ["2026-10-25T01:45Z", "2026-10-26T01:00Z"]),
    # `after` in the first pass: the second pass of earlier minutes is still ahead
    (
        "*/30 2 * * *",
        BER,
        "2026-10-25T00:40Z",
        ["2026-10-25T01:00Z", "2026-10-25T01:30Z", "2026-10-26T01:00Z"],
    ),
    ("0 30 2 * * *", BER, "2026-10-24T12:00Z", ["2026-10-25T00:30Z", "2026-10-26T01:30Z"]),
    (
        "0 */30 2 * * *",
        BER,
        "2026-10-25T00:15Z",
        ["2026-10-25T00:30Z", "2026-10-25T01:00Z", "2026-10-25T01:30Z"],
    ),
    # --- America/New_York
    ("30 2 * * *", NYC, "2026-03-07T12:00Z", ["2026-03-08T07:00Z", "2026-03-09T06:30Z"]),
    ("0 2 * * *", NYC, "2026-03-07T12:00Z", ["2026-03-08T07:00Z", "2026-03-09T06:00Z"]),
    (
        "*/30 * * * *",
        NYC,
        "2026-03-08T06:15Z",
        ["2026-03-08T06:30Z", "2026-03-08T07:00Z", "2026-03-08T07:30Z"],
    ),
    ("30 1 * * *", NYC, "2026-10-31T12:00Z", ["2026-11-01T05:30Z", "2026-11-02T06:30Z"]),
    (
        "*/30 1 * * *",
        NYC,
        "2026-10-31T12:00Z",
        [
            "2026-11-01T05:00Z",
            "2026-11-01T05:30Z",
            "2026-11-01T06:00Z",
            "2026-11-01T06:30Z",
            "2026-11-02T06:00Z",
        ],
    ),
    (
        "0 9 * * MON-FRI",
        NYC,
        "2026-03-06T12:00Z",
        ["2026-03-06T14:00Z", "2026-03-09T13:00Z", "2026-03-10T13:00Z"],
    ),
    # --- Australia/Lord_Howe: 30-minute shifts, gaps and folds not on the hour
    ("45 1 * * *", LHI, "2026-04-04T00:00Z", ["2026-04-04T14:45Z", "2026-04-05T15:15Z"]),
    (
        "*/15 1 * * *",
        LHI,
        "2026-04-04T00:00Z",
        [
            "2026-04-04T14:00Z",
            "2026-04-04T14:15Z",
            "2026-04-04T14:30Z",
            "2026-04-04T14:45Z",
            "2026-04-04T15:00Z",
            "2026-04-04T15:15Z",
            "2026-04-05T14:30Z",
        ],
    ),
    (
        "0 * * * *",
        LHI,
        "2026-04-04T13:30Z",
        ["2026-04-04T14:00Z", "2026-04-04T15:30Z", "2026-04-04T16:30Z"],
    ),
    (
        "30 * * * *",
        LHI,
        "2026-04-04T13:30Z",
        ["2026-04-04T14:30Z", "2026-04-04T15:00Z", "2026-04-04T16:00Z"],
    ),
    (
        "* */2 * * *",
        LHI,
        "2026-04-04T15:00Z",  # cronsim skips 02:00-02:29 here (ADR 0003)
        ["2026-04-04T15:30Z", "2026-04-04T15:31Z"],
    ),
    ("15 2 * * *", LHI, "2026-10-03T00:00Z", ["2026-10-03T15:30Z", "2026-10-04T15:15Z"]),
    (
        "0,15 2 * * *",
        LHI,
        "2026-10-03T00:00Z",
        ["2026-10-03T15:30Z", "2026-10-04T15:00Z", "2026-10-04T15:15Z"],
    ),
    ("45 2 * * *", LHI, "2026-10-03T00:00Z", ["2026-10-03T15:45Z", "2026-10-04T15:45Z"]),
    (
        "*/15 2 * * *",
        LHI,
        "2026-10-03T12:00Z",
        ["2026-10-03T15:30Z", "2026-10-03T15:45Z", "2026-10-04T15:00Z"],
    ),
    ("*/20 * * * *", LHI, "2026-10-03T15:10Z", ["2026-10-03T15:40Z", "2026-10-03T16:00Z"]),
    ("0 15 2 * * *", LHI, "2026-10-03T00:00Z", ["2026-10-03T15:30Z", "2026-10-04T15:15Z"]),
    # --- UTC and syntax
    ("0 0 * * *", "UTC", "2026-03-29T00:00Z", ["2026-03-30T00:00Z", "2026-03-31T00:00Z"]),
    (
        "*/10 * * * * *",
        "UTC",
        "2026-01-01T00:00:05Z",
        ["2026-01-01T00:00:10Z", "2026-01-01T00:00:20Z"],
    ),
    ("0 0 L * *", "UTC", "2026-01-31T12:00Z", ["2026-02-28T00:00Z", "2026-03-31T00:00Z"]),
    ("0 0 L 2 *", "UTC", "2027-03-01T00:00Z", ["2028-02-29T00:00Z"]),
    ("0 0 * * 1#1", "UTC", "2026-01-01T00:00Z", ["2026-01-05T00:00Z", "2026-02-02T00:00Z"]),
    (
        "0 0 13 * FRI",
        "UTC",
        "2026-02-01T00:00Z",  # OR: the 13th, and every Friday
        ["2026-02-06T00:00Z", "2026-02-13T00:00Z", "2026-02-20T00:00Z"],
    ),
    (
        "0 0 */2 * FRI",
        "UTC",
        "2026-02-01T00:00Z",  # starts with '*': AND (Debian)
        ["2026-02-13T00:00Z", "2026-02-27T00:00Z", "2026-03-13T00:00Z"],
    ),
    ("0 12 * JAN,jul SUN", "UTC", "2026-06-30T00:00Z", ["2026-07-05T12:00Z"]),
    (
        "5/20 * * * *",
        "UTC",
        "2026-01-01T00:00Z",
        ["2026-01-01T00:05Z", "2026-01-01T00:25Z", "2026-01-01T00:45Z", "2026-01-01T01:05Z"],
    ),
    ("0 0 * * 7", "UTC", "2026-01-01T00:00Z", ["2026-01-04T00:00Z"]),  # 7 is Sunday too
    ("@hourly", "UTC", "2026-01-01T00:30Z", ["2026-01-01T01:00Z"]),
    ("@daily", BER, "2026-01-01T00:30Z", ["2026-01-01T23:00Z"]),
    ("0 0 29 2 *", "UTC", "2026-01-01T00:00Z", ["2028-02-29T00:00Z", "2032-02-29T00:00Z"]),
]


@pytest.mark.parametrize(("cron", "zone", "after", "expected"), CASES)
def test_next_occurrences_table(cron: str, zone: str, after: str, expected: list[str]) -> None:
    assert next_occurrences(cron, zone, utc(after), len(expected)) == [utc(e) for e in expected]


@pytest.mark.parametrize(("cron", "zone", "after", "expected"), CASES)
def test_window_is_half_open_and_agrees(
    cron: str, zone: str, after: str, expected: list[str]
) -> None:
    fires = [utc(e) for e in expected]
    assert occurrences_between(cron, zone, utc(after), fires[-1], 100) == fires
    assert occurrences_between(cron, zone, fires[0], fires[-1], 100) == fires[1:]
    assert occurrences_between(cron, zone, utc(after), fires[-1], 1) == fires[:1]


def test_results_are_aware_utc_and_any_input_zone_works() -> None:
    after = datetime(2026, 3, 29, 3, 0, tzinfo=ZoneInfo(BER))  # 01:00Z
    fires = next_occurrences("*/30 * * * *", "UTC", after, 2)
    assert fires == [utc("2026-03-29T01:30Z"), utc("2026-03-29T02:00Z")]
    assert all(f.tzinfo is UTC for f in fires)


def test_microseconds_in_after_are_respected() -> None:
    after = utc("2026-01-01T00:00:10Z") + timedelta(microseconds=1)
    assert next_occurrences("*/10 * * * * *", "UTC", after, 1) == [utc("2026-01-01T00:00:20Z")]


def test_naive_datetimes_are_refused() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        next_occurrences("* * * * *", "UTC", datetime(2026, 1, 1), 1)


# ------------------------------------------------------------ starts/ends
AFTER = utc("2026-01-01T00:00Z")


@pytest.mark.parametrize(
    ("starts_at", "ends_at", "expected"),
    [
        (None, None, ["01:00", "02:00", "03:00"]),
        ("2026-01-01T05:00Z", None, ["05:00", "06:00", "07:00"]),  # inclusive start
        ("2026-01-01T05:00:01Z", None, ["06:00", "07:00", "08:00"]),
        ("2025-12-31T00:00Z", None, ["01:00", "02:00", "03:00"]),  # start in the past
        (None, "2026-01-01T02:00Z", ["01:00", "02:00"]),  # inclusive end
        (None, "2026-01-01T01:59:59Z", ["01:00"]),
        (None, "2026-01-01T00:00Z", []),
        ("2026-01-01T04:00Z", "2026-01-01T05:00Z", ["04:00", "05:00"]),
        ("2026-01-01T06:00Z", "2026-01-01T05:00Z", []),
    ],
)
def test_starts_at_and_ends_at(
    starts_at: str | None, ends_at: str | None, expected: list[str]
) -> None:
    got = next_occurrences(
        "0 * * * *",
        "UTC",
        AFTER,
        3,
        starts_at=utc(starts_at) if starts_at else None,
        ends_at=utc(ends_at) if ends_at else None,
    )
    assert got == [utc(f"2026-01-01T{e}Z") for e in expected]


def test_empty_requests() -> None:
    assert next_occurrences("* * * * *", "UTC", AFTER, 0) == []
    assert occurrences_between("* * * * *", "UTC", AFTER, AFTER, 10) == []
    assert occurrences_between("* * * * *", "UTC", AFTER, AFTER - timedelta(hours=1), 10) == []
    assert occurrences_between("* * * * *", "UTC", AFTER, AFTER + timedelta(hours=1), 0) == []


def test_cached_results_cannot_be_mutated_by_callers() -> None:
    first = occurrences_between("*/5 * * * *", "UTC", AFTER, AFTER + timedelta(minutes=10), 10)
    first.clear()
    again = occurrences_between("*/5 * * * *", "UTC", AFTER, AFTER + timedelta(minutes=10), 10)
    assert again == [AFTER + timedelta(minutes=5), AFTER + timedelta(minutes=10)]


@pytest.mark.parametrize(
    ("cron", "zone", "gap"),
    [
        ("*/10 * * * * *", "UTC", 10.0),
        ("* * * * *", "UTC", 60.0),
        ("0 9,17 * * *", BER, 8 * 3600.0),
        ("0 0 * * *", BER, 86400.0),
        ("0,59 59 23 31 12 *", "UTC", 59.0),
    ],
)
def test_min_gap_seconds(cron: str, zone: str, gap: float) -> None:
    assert min_gap_seconds(cron, zone, AFTER) == gap


def test_min_gap_is_measured_in_real_time_across_dst() -> None:
    # 01:30 EST, then 02:30 does not exist and fires at 03:00 EDT: 30 minutes apart
    assert min_gap_seconds("30 1,2 * * *", NYC, utc("2026-03-07T12:00Z"), sample=2) == 1800.0
    # fall back: 01:30 EDT then 02:30 EST are two real hours apart
    assert min_gap_seconds("30 1,2 * * *", NYC, utc("2026-10-31T12:00Z"), sample=2) == 7200.0


# ------------------------------------------------------------- validation
@pytest.mark.parametrize(
    ("cron", "why"),
    [
        ("", "non-empty"),
        ("* * * *", "got 4"),
        ("* * * * * * *", "got 7"),
        ("0 0 1 1 * 2030", "bad day-of-week"),
        ("60 * * * *", "outside 0-59"),
        ("* 24 * * *", "outside 0-23"),
        ("* * 0 * *", "outside 1-31"),
        ("* * 32 * *", "outside 1-31"),
        ("* * * 13 *", "outside 1-12"),
        ("* * * * 8", "outside 0-7"),
        ("61 * * * * *", "bad second"),
        ("5-1 * * * *", "low end below"),
        ("5-5 * * * *", "low end below"),  # croniter and cronsim disagree on these
        ("1-1/3 * * * *", "low end below"),
        ("*/0 * * * *", "positive"),
        ("a * * * *", "not a number"),
        ("* * * FOO *", "name"),
        ("0 0 31 2 *", "never occurs"),
        ("0 0 31 4,6 *", "never occurs"),
        ("@reboot", "unsupported macro"),
        ("0 0 ? * *", "bad day-of-month"),
        ("0 0 * * L", "bad day-of-week"),
        ("0 0 * * 8L", "outside 0-7"),
        ("0 0 L-31 * *", "0-30"),
        ("0 0 L-x * *", "0-30"),
        ("0 0 32W * *", "outside 1-31"),
        ("0 0 0W * *", "outside 1-31"),
        ("0 0 W * *", "bad day-of-month"),
        ("0 0 1-5W * *", "bad day-of-month"),
        ("0 0 30W 2 *", "never fires"),  # W never leaves the month
        ("0 0 L-29 2 *", "never fires"),
        ("0 0 * * 1#6", "1-5"),
        ("0 0 * * 1,2#3", "unsupported syntax"),  # croniter refuses the mix
        ("L * * * *", "bad minute"),
        ("H * * * *", "not a number"),
        ("0 0 * * *\u00a0", "ASCII"),
    ],
)
def test_invalid_cron(cron: str, why: str) -> None:
    with pytest.raises(InvalidCron) as info:
        parse_cron(cron)
    assert str(info.value).startswith("cron: ")
    assert why in str(info.value)
    assert isinstance(info.value, DomainError)


def test_invalid_cron_is_raised_by_every_entry_point() -> None:
    with pytest.raises(InvalidCron):
        next_occurrences("bad", "UTC", AFTER, 1)
    with pytest.raises(InvalidCron):
        occurrences_between("bad", "UTC", AFTER, AFTER + timedelta(hours=1), 1)


@pytest.mark.parametrize("zone", ["Mars/Base", "", "../etc/passwd", "utc", "localtime", "EST5EDT "])
def test_invalid_timezone(zone: str) -> None:
    with pytest.raises(InvalidTimezone) as info:
        load_timezone(zone)
    assert str(info.value) == f"timezone: unknown IANA time zone {zone!r}"
    with pytest.raises(InvalidTimezone):
        next_occurrences("* * * * *", zone, AFTER, 1)


def test_load_timezone() -> None:
    assert load_timezone("Europe/Berlin") == ZoneInfo("Europe/Berlin")
    assert load_timezone("UTC").utcoffset(datetime(2026, 1, 1)) == timedelta(0)


@pytest.mark.parametrize(
    ("cron", "has_seconds", "wall_clock"),
    [
        ("30 2 * * *", False, True),
        ("0 9,17 * * 1-5", False, True),
        ("0 1-3/2 * * *", False, True),
        ("*/5 * * * *", False, False),
        ("0 * * * *", False, False),
        ("15 */2 * * *", False, False),
        ("*/20 2 * * *", False, False),
        ("0,*/30 2 * * *", False, False),  # contains '*': interval (see divergence test)
        ("*/10 * * * * *", True, False),
        ("0 30 2 * * *", True, True),
        ("@daily", False, True),
        ("@hourly", False, False),
    ],
)
def test_spec_flags(cron: str, has_seconds: bool, wall_clock: bool) -> None:
    spec = parse_cron(cron)
    assert (spec.has_seconds, spec.is_wall_clock) == (has_seconds, wall_clock)
    assert spec.expr == cron


# ----------------------------------------------- documented divergences
def _cronsim(cron: str, zone: str, after: str, count: int) -> list[datetime]:
    it = CronSim(cron, utc(after).astimezone(ZoneInfo(zone)))
    return [next(it).astimezone(UTC) for _ in range(count)]


def test_divergence_six_field_wall_clock() -> None:
    """cronsim keeps 6-field expressions in real time; the contract does not (ADR 0003)."""
    ours = next_occurrences("0 30 2 * * *", BER, utc("2026-03-28T12:00Z"), 1)
    assert ours == [utc("2026-03-29T01:00Z")]
    assert _cronsim("0 30 2 * * *", BER, "2026-03-28T12:00Z", 1) == [utc("2026-03-30T00:30Z")]


def test_divergence_star_inside_a_list() -> None:
    """Debian/cronsim test the first character; the contract tests the whole field."""
    ours = next_occurrences("0,*/30 2 * * *", BER, utc("2026-03-28T12:00Z"), 1)
    assert ours == [utc("2026-03-30T00:00Z")]  # interval: the skipped hour never fires
    assert _cronsim("0,*/30 2 * * *", BER, "2026-03-28T12:00Z", 1) == [utc("2026-03-29T01:00Z")]


def test_divergence_cronsim_skips_half_hour_after_lord_howe_fall_back() -> None:
    """cronsim steps hours in real 3600 s from hh:00, landing on hh:30 in a 30-minute zone."""
    after = "2026-04-04T15:00Z"  # 01:30 +10:30, second pass
    assert next_occurrences("* */2 * * *", LHI, utc(after), 1) == [utc("2026-04-04T15:30Z")]
    assert _cronsim("* */2 * * *", LHI, after, 1) == [utc("2026-04-04T16:00Z")]
