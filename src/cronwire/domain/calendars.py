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
timetable: the instants that fire or are recorded skipped, sorted, one per instant. A
shifted occurrence that lands on an instant another occurrence already has is that one
run (UNIQUE (schedule_id, scheduled_for)). So the effective timetable is just another
timetable, and the planner's cursor, look-ahead, misfire and partition rules apply to it
unchanged; a calendar-skipped instant is recognised by its date being excluded.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta, tzinfo
from enum import StrEnum

from cronwire.domain.cron import load_timezone, next_occurrences, occurrences_between
from cronwire.domain.dst import EPOCH, EPOCH_UTC, gap_end, offsets
from cronwire.domain.errors import RuleViolation

# How far a shift looks for a business day. A holiday run as long as the end of the year
# (24 Dec .. 6 Jan with its weekends) fits; a calendar excluding more than this in a row
# skips instead of looping.
MAX_SHIFT_DAYS = 31
_DAY = timedelta(days=1)
_TICK = timedelta(microseconds=1)
# A local day's instants lie within this of its midnights read at the day's offsets.
_MARGIN = timedelta(hours=3)
# The occurrences of one excluded day that can be shifted (a 1-second cron has 86,400).
_PER_DAY = 86_400 + 3 * 3600 * 2
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


def _day_span(day: date, tz: tzinfo) -> tuple[datetime, datetime]:
    """(after, until) around every instant of local ``day`` (filter by date after)."""
    start = datetime.combine(day, time(0), tzinfo=tz).astimezone(UTC)
    end = datetime.combine(day + _DAY, time(0), tzinfo=tz).astimezone(UTC)
    return start - _MARGIN, end + _MARGIN


def _of_day(timetable: str, timezone: str, tz: tzinfo, day: date) -> list[datetime]:
    lo, hi = _day_span(day, tz)
    return [t for t in occurrences_between(timetable, timezone, lo, hi, _PER_DAY)
            if local_date(t, tz) == day]


def effective_between(
    timetable: str, timezone: str, after: datetime, until: datetime, limit: int,
    exclusions: Exclusions,
) -> list[datetime]:
    """The effective instants in ``(after, until]``, oldest first, at most ``limit``:
    what ``occurrences_between`` is for a schedule without calendars (and is, then).

    Two parts, each bounded by the window, not by the calendar's days: the occurrences of
    dates no calendar lists (a walk that steps over an excluded day at once), up to
    ``limit`` of them; and, for each excluded day within reach whose business day falls in
    the window, only its occurrences whose wall time lands in the window."""
    if not exclusions or exclusions.policy is CalendarPolicy.SKIP:
        return occurrences_between(timetable, timezone, after, until, limit)
    tz = load_timezone(timezone)
    regular, hi = _regular(timetable, timezone, tz, after, until, limit, exclusions)
    found = set(regular)
    found.update(_moved_into(timetable, timezone, tz, after, hi, exclusions))
    return sorted(found)[:limit]


def _regular(timetable: str, timezone: str, tz: tzinfo, after: datetime, until: datetime,
             limit: int, exclusions: Exclusions) -> tuple[list[datetime], datetime]:
    """The occurrences in ``(after, until]`` of dates no calendar lists, at most
    ``limit``, and the end of the span they account for (``until``, or the last one)."""
    kept: list[datetime] = []
    cursor = after
    page = max(limit, 64)
    while cursor < until:
        found = occurrences_between(timetable, timezone, cursor, until, page)
        for t in found:
            day = local_date(t, tz)
            if exclusions.excludes(day):  # the whole day is the shifting part's
                cursor = max(t, _day_start(day + _DAY, tz) - _TICK)
                break
            kept.append(t)
            cursor = t
            if len(kept) == limit:
                return kept, t
        else:
            if len(found) < page:
                break
    return kept, until


def _day_start(day: date, tz: tzinfo) -> datetime:
    return datetime.combine(day, time(0), tzinfo=tz).astimezone(UTC)


def _moved_into(timetable: str, timezone: str, tz: tzinfo, lo: datetime, hi: datetime,
                exclusions: Exclusions) -> list[datetime]:
    """The instants in ``(lo, hi]`` of the occurrences of excluded days: shifted to a
    business day in the window, or kept where they are (skipped) when none is in reach."""
    first, last = local_date(lo, tz), local_date(hi, tz)
    reach = timedelta(days=MAX_SHIFT_DAYS + 1)
    step = 1 if exclusions.policy is CalendarPolicy.NEXT_BUSINESS_DAY else -1
    days = exclusions.within(first - reach, last) if step == 1 else \
        exclusions.within(first, last + reach)
    moved: list[datetime] = []
    for day in days:
        target = business_day(day, exclusions, step)
        if target is None:  # skipped where it is
            if first <= day <= last:
                moved.extend(t for t in _of_day(timetable, timezone, tz, day) if lo < t <= hi)
            continue
        if not first <= target <= last:
            continue
        # The window's wall times on the target day, read on the excluded day.
        start = max(lo, _day_start(target, tz) - _TICK).astimezone(tz).replace(tzinfo=None)
        end = min(hi, _day_start(target + _DAY, tz)).astimezone(tz).replace(tzinfo=None)
        shift = day - target
        since = datetime.combine(start.date() + shift, start.time(), tzinfo=tz)
        until = datetime.combine(end.date() + shift, end.time(), tzinfo=tz)
        for t in occurrences_between(timetable, timezone, since.astimezone(UTC) - _MARGIN,
                                     until.astimezone(UTC) + _MARGIN, _PER_DAY):
            local = t.astimezone(tz)
            if local.date() == day:
                at = wall_clock_instant(tz, datetime.combine(target, local.time()))
                if lo < at <= hi:
                    moved.append(at)
    return moved


def effective_next(
    timetable: str, timezone: str, after: datetime, count: int, exclusions: Exclusions,
    *, starts_at: datetime | None = None, ends_at: datetime | None = None,
) -> list[datetime]:
    """``next_occurrences`` of the effective timetable: the next ``count`` instants
    strictly after ``after``, none before ``starts_at`` nor after ``ends_at`` (the
    bounds hold the instants that fire, shifted or not)."""
    if not exclusions or exclusions.policy is CalendarPolicy.SKIP:
        return next_occurrences(timetable, timezone, after, count, starts_at=starts_at,
                                ends_at=ends_at)
    if starts_at is not None and starts_at > after:
        after = starts_at - _TICK
    found: list[datetime] = []
    lo = after
    # No end: walk a year at a time (a timetable fires at least once in 40 years or so;
    # ten empty years in a row end the walk: the calendar or the rule leaves nothing).
    step, empty = timedelta(days=366), 0
    while len(found) < count and empty < 10:
        hi = lo + step if ends_at is None else min(ends_at, lo + step)
        if hi <= lo:
            break
        page = effective_between(timetable, timezone, lo, hi, count - len(found), exclusions)
        found.extend(page)  # a full page ends the walk; a short one exhausted (lo, hi]
        empty = 0 if page else empty + 1
        lo = hi
    return found[:count]


def annotated(timetable: str, timezone: str, instants: list[datetime],
              exclusions: Exclusions) -> list[Verdict]:
    """Each effective instant (oldest first) with its verdict: skipped (its date is
    excluded), shifted (from an excluded date; when it also is an occurrence of its own
    the shift is what is said), or as planned. For previews."""
    if not exclusions or not instants or not timetable:
        return [Verdict(t) for t in instants]
    tz = load_timezone(timezone)
    sources: dict[datetime, Verdict] = {}
    if exclusions.policy is not CalendarPolicy.SKIP:
        reach = timedelta(days=MAX_SHIFT_DAYS + 1)
        first, last = local_date(instants[0], tz) - reach, local_date(instants[-1], tz) + reach
        for day in exclusions.within(first, last):
            for t in _of_day(timetable, timezone, tz, day):
                found = verdict(t, tz, exclusions)
                if found.shifted:
                    sources.setdefault(found.at, found)
    return [verdict(t, tz, exclusions) if exclusions.excludes(local_date(t, tz))
            else sources.get(t, Verdict(t)) for t in instants]
