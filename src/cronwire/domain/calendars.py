"""Holiday and business-day calendars applied to a timetable (ADR 0064). Pure.

A schedule may exclude the dates of some calendars. Each occurrence of its timetable
(cron or rrule, local wall clock in the schedule's zone) whose *local date* is excluded
is then, by ``calendar_policy``:

* ``skip``: kept at its own instant, but written as a ``skipped`` run
  (``skip_reason: "calendar"``);
* ``next_business_day`` / ``previous_business_day``: moved to the same local wall-clock
  time on the nearest later / earlier day that is neither excluded nor a Saturday or
  Sunday, resolved with the wall-clock DST rule (a time in a gap fires at the gap's end,
  a time in a fold at its first pass). No such day within ``MAX_SHIFT_DAYS``: skipped,
  as under ``skip``. A weekend day that no calendar lists fires as planned.

Everything downstream (planner, preview, backfill, explain) walks the *effective*
timetable (``calendar_walk.py``): the instants that fire or are recorded skipped, sorted, one per instant. A
shifted occurrence that lands on an instant another occurrence already has is that one
run (UNIQUE (schedule_id, scheduled_for)). So the effective timetable is just another
timetable, and the planner's cursor, look-ahead, misfire and partition rules apply to it
unchanged; a calendar-skipped instant is recognised by its date being excluded.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, datetime, timedelta, tzinfo
from enum import StrEnum

from cronwire.domain.dst import EPOCH, EPOCH_UTC, gap_end, offsets
from cronwire.domain.errors import RuleViolation

# How far a shift looks for a business day. A holiday run as long as the end of the year
# (24 Dec .. 6 Jan with its weekends) fits; a calendar excluding more than this in a row
# skips instead of looping.
MAX_SHIFT_DAYS = 31
_SATURDAY, _SUNDAY = 5, 6


class CalendarPolicy(StrEnum):
    SKIP = "skip"
    NEXT_BUSINESS_DAY = "next_business_day"
    PREVIOUS_BUSINESS_DAY = "previous_business_day"


CALENDAR_POLICIES = tuple(policy.value for policy in CalendarPolicy)


def parse_calendar_policy(value: str) -> CalendarPolicy:
    try:
        return CalendarPolicy(value)
    except ValueError:
        raise RuleViolation("calendar_policy",
                            f"must be one of {', '.join(CALENDAR_POLICIES)}") from None


@dataclass(frozen=True, slots=True)
class Exclusions:
    """The dates a schedule excludes (sorted, each with the name of the first of its
    calendars that lists it) and its policy. Empty dates: the timetable as it is."""

    policy: CalendarPolicy = CalendarPolicy.SKIP
    dates: tuple[date, ...] = ()
    names: tuple[str, ...] = ()

    @staticmethod
    def of(policy: CalendarPolicy, calendars: Iterable[tuple[str, Iterable[date]]]) -> Exclusions:
        """From ``(calendar name, its dates)`` in the schedule's order of calendars."""
        named: dict[date, str] = {}
        for name, days in calendars:
            for day in days:
                named.setdefault(day, name)
        ordered = sorted(named)
        return Exclusions(policy, tuple(ordered), tuple(named[d] for d in ordered))

    def __bool__(self) -> bool:
        return bool(self.dates)

    def calendar_of(self, day: date) -> str | None:
        """The name of the calendar that excludes ``day``; None if none does."""
        i = bisect_left(self.dates, day)
        return self.names[i] if i < len(self.dates) and self.dates[i] == day else None

    def excludes(self, day: date) -> bool:
        return self.calendar_of(day) is not None

    def within(self, first: date, last: date) -> tuple[date, ...]:
        """The excluded dates in ``[first, last]``."""
        return self.dates[bisect_left(self.dates, first):bisect_right(self.dates, last)]

    def is_business_day(self, day: date) -> bool:
        return day.weekday() not in (_SATURDAY, _SUNDAY) and not self.excludes(day)

    def key(self) -> tuple[object, ...]:
        """What two schedules must share to share a timetable (the planner's cache)."""
        return (self.policy, self.dates) if self.dates else ()


NO_EXCLUSIONS = Exclusions()


@dataclass(frozen=True, slots=True)
class Verdict:
    """What the calendar makes of one occurrence: ``fire`` at ``at`` (itself, or the
    shifted instant when ``shifted``), or ``skip`` it; ``day`` and ``calendar`` name the
    excluded date and the calendar listing it (None when nothing was excluded)."""

    at: datetime
    skip: bool = False
    shifted: bool = False
    day: date | None = None
    calendar: str | None = None


def local_date(instant: datetime, tz: tzinfo) -> date:
    return instant.astimezone(tz).date()


def wall_clock_instant(tz: tzinfo, local: datetime) -> datetime:
    """The instant (aware UTC) of a naive local time under the wall-clock rule."""
    off0, off1 = offsets(tz, local)
    if off0 < off1:  # a gap: the transition instant that opens it
        naive = gap_end(tz, local, off0, off1)
    else:  # one instant, or a fold's first pass
        naive = local - off0
    return EPOCH_UTC + (naive - EPOCH)


def business_day(day: date, exclusions: Exclusions, step: int) -> date | None:
    """The nearest business day after (``step`` 1) or before (-1) ``day``, at most
    MAX_SHIFT_DAYS away; None if there is none that near."""
    for distance in range(1, MAX_SHIFT_DAYS + 1):
        candidate = day + timedelta(days=step * distance)
        if exclusions.is_business_day(candidate):
            return candidate
    return None


def verdict(instant: datetime, tz: tzinfo, exclusions: Exclusions) -> Verdict:
    """What ``exclusions`` make of the occurrence at ``instant`` (aware)."""
    local = instant.astimezone(tz)
    name = exclusions.calendar_of(local.date())
    if name is None:
        return Verdict(instant)
    if exclusions.policy is CalendarPolicy.SKIP:
        return Verdict(instant, skip=True, day=local.date(), calendar=name)
    step = 1 if exclusions.policy is CalendarPolicy.NEXT_BUSINESS_DAY else -1
    target = business_day(local.date(), exclusions, step)
    if target is None:
        return Verdict(instant, skip=True, day=local.date(), calendar=name)
    wall = datetime.combine(target, local.time().replace(tzinfo=None))
    return Verdict(wall_clock_instant(tz, wall), shifted=True, day=local.date(),
                   calendar=name)


def is_calendar_skip(instant: datetime, tz: tzinfo, exclusions: Exclusions) -> bool:
    """An instant of the effective timetable that is recorded ``skipped``: only skipped
    occurrences keep an excluded date (shifted ones land on business days)."""
    return bool(exclusions) and exclusions.excludes(local_date(instant, tz))
