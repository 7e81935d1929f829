"""Walk local wall-clock time for cron matches and map them onto UTC instants.

A cron expression matches *local naive* times (``LocalPattern``); a time
zone decides which instants those are. Most local times are one instant. Around a DST
transition a local time may be no instant (spring forward: a gap) or two
(fall back: a fold). The rule applied here is Debian cron's, as
healthchecks.io's ``cronsim`` implements it, chosen per schedule:

* wall-clock schedules (minute and hour fields without ``*``): a time in a
  gap fires once at the end of the gap (the transition instant; several such
  times collapse into that one fire); a time in a fold fires once, at its
  first occurrence (``fold=0``);
* interval schedules (anything else): real time -- gap times never fire,
  fold times fire at both occurrences.

Everything here works on naive datetimes: local ones from the cron matcher,
UTC ones out. That keeps the arithmetic exact and cheap (no aware
comparisons) and keeps zoneinfo calls to two ``utcoffset`` per candidate.
"""

from __future__ import annotations

import calendar
from bisect import bisect_left
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, tzinfo
from functools import lru_cache

NextLocal = Callable[[datetime], datetime | None]
"""Smallest matching local naive time >= the argument, or None past the horizon."""

_SECOND = timedelta(seconds=1)
_ZERO = timedelta(0)
# Naive <-> aware UTC by arithmetic: datetime.replace(tzinfo=...) is far slower.
EPOCH = datetime(1970, 1, 1)
EPOCH_UTC = datetime(1970, 1, 1, tzinfo=UTC)
_HORIZON_YEARS = 100  # a valid expression fires at least every 40 years or so


@dataclass(frozen=True, slots=True)
class LocalPattern:
    """The local times a cron expression allows, each field as its sorted values."""

    seconds: tuple[int, ...]
    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    days: frozenset[int]  # day-of-month values; all of 1..31 for '*'
    months: tuple[int, ...]
    weekdays: frozenset[int]  # 0=Sunday..6=Saturday
    nth_weekdays: frozenset[tuple[int, int]]  # (weekday, n) for 'weekday#n'
    day_and: bool  # Debian: AND the two day fields when either starts with '*'
    # Quartz/EventBridge day tokens (ADR 0058). Day-of-month: 'L' and 'L-n' as days
    # before the month's last (0 for 'L'); 'nW' as n; 'LW'. Day-of-week: 'dL' as d.
    from_last: frozenset[int] = frozenset()
    nearest_weekday: frozenset[int] = frozenset()
    last_workday: bool = False
    last_weekdays: frozenset[int] = frozenset()
    _month_days: dict[tuple[int, int], tuple[int, ...]] = field(
        default_factory=dict, compare=False, hash=False, repr=False
    )

    def _day_ok(self, day: int, length: int, weekday: int) -> bool:
        dom = day in self.days or (length - day) in self.from_last
        if not dom and (self.nearest_weekday or self.last_workday):
            dom = day in _workdays_of(
                length, (weekday - day + 1) % 7, self.nearest_weekday, self.last_workday)
        dow = (weekday in self.weekdays or (weekday, (day + 6) // 7) in self.nth_weekdays
               or (weekday in self.last_weekdays and day + 7 > length))
        return (dom and dow) if self.day_and else (dom or dow)

    def fires_some_day(self) -> bool:
        """Whether any date at all satisfies the day fields. A month's shape is
        its length and first weekday, so 12 x 2 x 7 shapes decide for all years."""
        for month in self.months:
            for length in (28, 29) if month == 2 else (calendar.monthrange(2001, month)[1],):
                for first in range(7):
                    for day in range(1, length + 1):
                        if self._day_ok(day, length, (first + day - 1) % 7):
                            return True
        return False

    def days_in(self, year: int, month: int) -> tuple[int, ...]:
        """Sorted days of ``year-month`` the day fields allow; memoised per pattern."""
        found = self._month_days.get((year, month))
        if found is None:
            if len(self._month_days) >= 600:
                self._month_days.clear()
            first, length = calendar.monthrange(year, month)  # first: Monday=0
            found = tuple(
                d for d in range(1, length + 1) if self._day_ok(d, length, (first + d) % 7)
            )
            self._month_days[(year, month)] = found
        return found

    def next_local(self, t: datetime) -> datetime | None:
        """Smallest naive local time >= ``t`` (whole seconds) the pattern matches."""
        year, month, day = t.year, t.month, t.day
        hour, minute, second = t.hour, t.minute, t.second
        horizon = min(year + _HORIZON_YEARS, 9998)
        while year <= horizon:
            i = bisect_left(self.months, month)
            if i == len(self.months):
                year, month, day, hour, minute, second = year + 1, self.months[0], 1, 0, 0, 0
                continue
            if self.months[i] != month:
                month, day, hour, minute, second = self.months[i], 1, 0, 0, 0
            days = self.days_in(year, month)
            i = bisect_left(days, day)
            if i == len(days):
                month, day, hour, minute, second = month + 1, 1, 0, 0, 0
                continue
            if days[i] != day:
                day, hour, minute, second = days[i], 0, 0, 0
            i = bisect_left(self.hours, hour)
            if i == len(self.hours):
                day, hour, minute, second = day + 1, 0, 0, 0
                continue
            if self.hours[i] != hour:
                hour, minute, second = self.hours[i], 0, 0
            i = bisect_left(self.minutes, minute)
            if i == len(self.minutes):
                hour, minute, second = hour + 1, 0, 0
                continue
            if self.minutes[i] != minute:
                minute, second = self.minutes[i], 0
            i = bisect_left(self.seconds, second)
            if i == len(self.seconds):
                minute, second = minute + 1, 0
                continue
            return datetime(year, month, day, hour, minute, self.seconds[i])
        return None


@lru_cache(maxsize=4096)
def _workdays_of(
    length: int, first: int, nearest: frozenset[int], last_workday: bool
) -> frozenset[int]:
    """The days 'nW' and 'LW' pick in a month of ``length`` days starting on weekday
    ``first`` (0=Sunday). Quartz's rule: the weekday (Monday..Friday) nearest to day n,
    never leaving the month -- a Saturday 1st moves to Monday the 3rd, a Sunday last day
    to Friday; a day the month does not have ('31W' in April) picks nothing."""
    picked = set()
    targets = [n for n in nearest if n <= length] + ([length] if last_workday else [])
    for n in targets:
        weekday = (first + n - 1) % 7
        if weekday == 6:  # Saturday: the Friday before, or Monday when n is the 1st
            n = n + 2 if n == 1 else n - 1
        elif weekday == 0:  # Sunday: the Monday after, or Friday when n is the last day
            n = n - 2 if n == length else n + 1
        picked.add(n)
    return frozenset(picked)


def offsets(tz: tzinfo, local: datetime) -> tuple[timedelta, timedelta]:
    """UTC offsets of a naive local time (given with ``fold=0``) read with
    ``fold=0`` and ``fold=1``.

    Equal: the time is one instant. ``fold=0`` larger: a fold (fall back).
    ``fold=0`` smaller: a gap (spring forward); PEP 495 reads a gap time with
    the offset before the transition for ``fold=0``. (The fold=1 copy is
    built, not ``replace``d: ``replace`` costs several times more.)
    """
    t = local
    off0 = tz.utcoffset(t)
    off1 = tz.utcoffset(datetime(t.year, t.month, t.day, t.hour, t.minute, t.second, fold=1))
    return (off0 if off0 is not None else _ZERO, off1 if off1 is not None else _ZERO)


@lru_cache(maxsize=4096)
def gap_end(tz: tzinfo, local: datetime, off0: timedelta, off1: timedelta) -> datetime:
    """The transition instant (naive UTC) that opens the gap ``local`` falls in.

    ``local - off1`` is an instant before the transition and ``local - off0``
    one at or after it; transitions sit on whole seconds, so a binary search
    on seconds finds it exactly, whatever the size or alignment of the gap
    (Lord Howe's 30 minutes, Samoa's whole day in 2011).
    """
    lo, hi = local - off1, local - off0
    while hi - lo > _SECOND:
        mid = lo + timedelta(seconds=int((hi - lo).total_seconds()) // 2)
        if (EPOCH_UTC + (mid - EPOCH)).astimezone(tz).utcoffset() == off0:
            lo = mid
        else:
            hi = mid
    return hi


def utc_instants(
    next_local: NextLocal, tz: tzinfo, after: datetime, *, wall_clock: bool
) -> Iterator[datetime]:
    """Fire instants (naive UTC, whole seconds), strictly increasing, all after ``after``.

    ``after`` is naive UTC. Candidates are walked in local naive order; that
    order is also UTC order except inside a fold, where every first-pass
    instant precedes every second-pass one. So an interval schedule's fold
    candidates are buffered as one run and released first-pass then
    second-pass, which keeps the stream sorted without a look-ahead window.
    """
    seen_locally = (EPOCH_UTC + (after - EPOCH)).astimezone(tz)
    local_after = after + (seen_locally.utcoffset() or _ZERO)  # naive, fold=0
    start = local_after - timedelta(microseconds=local_after.microsecond) + _SECOND
    off0, off1 = offsets(tz, local_after)
    if not wall_clock and off0 > off1 and seen_locally.fold == 0:
        # `after` is in a fold's first pass: earlier local times still have
        # their second-pass instant ahead of `after`.
        start -= off0 - off1
    last = after
    first_pass: list[datetime] = []
    second_pass: list[datetime] = []

    def flush() -> Iterator[datetime]:
        nonlocal last
        for instant in (*first_pass, *second_pass):
            if instant > last:
                last = instant
                yield instant
        first_pass.clear()
        second_pass.clear()

    local: datetime | None = start
    while local is not None:
        local = next_local(local)
        if local is None:
            break
        off0, off1 = offsets(tz, local)
        if off0 == off1:
            instant: datetime | None = local - off0
        elif off0 > off1:  # fold
            if wall_clock:
                instant = local - off0
            else:
                instant = None
                if second_pass and local - off0 > second_pass[-1]:
                    yield from flush()  # a later fold: release the earlier one first
                first_pass.append(local - off0)
                second_pass.append(local - off1)
        else:  # gap
            instant = gap_end(tz, local, off0, off1) if wall_clock else None
        if instant is not None:
            if second_pass:
                yield from flush()
            if instant > last:
                last = instant
                yield instant
        local += _SECOND
    yield from flush()
