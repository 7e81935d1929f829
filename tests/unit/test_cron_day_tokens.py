"""The Quartz/EventBridge day tokens ('L', 'L-n', 'nW', 'LW', 'd#n', 'dL'), against dates
checked by hand on a printed calendar (2026: 1 Jan a Thursday; 2027: 1 Feb a Monday).

Property tests against an independent day walk and against cronsim are in
test_cron_day_token_properties.py.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from cronwire.domain.cron import next_occurrences, parse_cron

BER = "Europe/Berlin"


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


CASES = [
    # last day of February, non-leap then leap years
    ("0 0 L 2 *", "UTC", "2026-01-01T00:00Z",
     ["2026-02-28T00:00Z", "2027-02-28T00:00Z", "2028-02-29T00:00Z"]),
    # L-n: n days before the last
    ("0 0 L-1 2 *", "UTC", "2026-01-01T00:00Z",
     ["2026-02-27T00:00Z", "2027-02-27T00:00Z", "2028-02-28T00:00Z"]),
    ("0 0 L-0 4 *", "UTC", "2026-01-01T00:00Z", ["2026-04-30T00:00Z"]),
    # L-30 exists only in 31-day months: the 1st of those
    ("0 0 L-30 * *", "UTC", "2026-01-02T00:00Z",
     ["2026-03-01T00:00Z", "2026-05-01T00:00Z", "2026-07-01T00:00Z"]),
    # 15W: 15 Aug 2026 is a Saturday -> Friday 14th; 15 Mar 2026 a Sunday -> Monday 16th
    ("0 9 15W 8 *", "UTC", "2026-01-01T00:00Z", ["2026-08-14T09:00Z"]),
    ("0 9 15W 3 *", "UTC", "2026-01-01T00:00Z", ["2026-03-16T09:00Z"]),
    ("0 9 15W 6 *", "UTC", "2026-01-01T00:00Z", ["2026-06-15T09:00Z"]),  # a Monday
    # 1W never leaves the month: Saturday 1 Aug 2026 -> Monday 3rd (not Friday 31 Jul)
    ("0 0 1W 8 *", "UTC", "2026-01-01T00:00Z", ["2026-08-03T00:00Z"]),
    ("0 0 1W 3 *", "UTC", "2026-01-01T00:00Z", ["2026-03-02T00:00Z"]),  # Sunday -> Monday
    # ...nor does 31W: Sunday 31 May 2026 is the last day -> Friday 29th (not Monday 1 Jun)
    ("0 0 31W 5 *", "UTC", "2026-01-01T00:00Z", ["2026-05-29T00:00Z"]),
    # a day the month does not have picks nothing: 31W fires in the 31-day months only
    ("0 0 31W 4,5 *", "UTC", "2026-01-01T00:00Z", ["2026-05-29T00:00Z", "2027-05-31T00:00Z"]),
    # LW: the last weekday. Jan 2026 ends on a Saturday, May 2026 on a Sunday,
    # Feb 2027 on a Sunday, Nov 2026 on a Monday
    ("0 0 LW 1 *", "UTC", "2026-01-01T00:00Z", ["2026-01-30T00:00Z"]),
    ("0 0 LW 5 *", "UTC", "2026-01-01T00:00Z", ["2026-05-29T00:00Z"]),
    ("0 0 LW 2 *", "UTC", "2027-01-01T00:00Z", ["2027-02-26T00:00Z"]),
    ("0 0 LW 11 *", "UTC", "2026-01-01T00:00Z", ["2026-11-30T00:00Z"]),
    # 2#5: only months with a fifth Tuesday (none in Jan/Feb 2026; Mar 31, Jun 30)
    ("0 0 * * 2#5", "UTC", "2026-01-01T00:00Z",
     ["2026-03-31T00:00Z", "2026-06-30T00:00Z", "2026-09-29T00:00Z"]),
    ("0 0 * * TUE#5", "UTC", "2026-01-01T00:00Z", ["2026-03-31T00:00Z"]),
    # dL: the last Friday; the last Sunday (7 and 0 both Sunday)
    ("0 0 * * 5L", "UTC", "2026-01-01T00:00Z", ["2026-01-30T00:00Z", "2026-02-27T00:00Z"]),
    ("0 0 * * FRIL", "UTC", "2026-01-01T00:00Z", ["2026-01-30T00:00Z"]),
    ("0 0 * 3 7L", "UTC", "2026-01-01T00:00Z", ["2026-03-29T00:00Z"]),
    # lists mix tokens and values
    ("0 0 1,15W,L 8 *", "UTC", "2026-01-01T00:00Z",
     ["2026-08-01T00:00Z", "2026-08-14T00:00Z", "2026-08-31T00:00Z"]),
    # Debian OR of the two day fields (neither starts with '*'): the last day, or Mondays
    ("0 0 L * MON", "UTC", "2026-01-27T00:00Z", ["2026-01-31T00:00Z", "2026-02-02T00:00Z"]),
    # ...AND when one starts with '*': last Fridays that are odd days (January's, the
    # 30th, is even)
    ("0 0 */2 * 5L", "UTC", "2026-01-01T00:00Z", ["2026-02-27T00:00Z", "2026-03-27T00:00Z"]),
    # DST unchanged. Berlin springs forward on the last Sunday of March (29 Mar 2026,
    # 02:00 CET -> 03:00 CEST) and falls back on the last Sunday of October (25 Oct 2026,
    # 03:00 CEST -> 02:00 CET). Wall-clock: the skipped 02:30 fires at the gap's end...
    ("30 2 * 3 0L", BER, "2026-01-01T00:00Z", ["2026-03-29T01:00Z", "2027-03-28T01:00Z"]),
    # ...the repeated 02:30 once, at its first occurrence (CEST)
    ("30 2 * 10 0L", BER, "2026-01-01T00:00Z", ["2026-10-25T00:30Z", "2027-10-31T00:30Z"]),
    # interval schedules keep real time: the repeated hour fires twice
    ("*/30 2 * 10 SUNL", BER, "2026-10-25T00:00Z",
     ["2026-10-25T00:30Z", "2026-10-25T01:00Z", "2026-10-25T01:30Z"]),
    # 6 fields, seconds first
    ("30 0 12 LW * *", "UTC", "2026-01-01T00:00Z", ["2026-01-30T12:00:30Z"]),
]


@pytest.mark.parametrize(("cron", "zone", "after", "expected"), CASES)
def test_day_tokens_on_hand_checked_dates(
    cron: str, zone: str, after: str, expected: list[str]
) -> None:
    assert next_occurrences(cron, zone, utc(after), len(expected)) == [utc(e) for e in expected]


@pytest.mark.parametrize("cron", ["0 0 L-2 * *", "0 0 15W * *", "0 0 LW * *",
                                  "0 0 * * 5L", "0 0 * * 1#5", "0 0 l-2 * *", "0 0 lw * fril"])
def test_tokens_parse_in_either_case(cron: str) -> None:
    assert parse_cron(cron).pattern.fires_some_day()
