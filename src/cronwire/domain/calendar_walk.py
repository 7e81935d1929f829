"""The effective timetable of a schedule with calendars (ADR 0064): the instants its
occurrences fire at or are recorded skipped at, after :func:`calendars.verdict`, sorted,
one per instant. Pure; the same signatures as ``cron.occurrences_between`` and
``cron.next_occurrences``, which they are for a schedule without calendars."""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta, tzinfo

from cronwire.domain.calendars import (
    MAX_SHIFT_DAYS,
    CalendarPolicy,
    Exclusions,
    Verdict,
    business_day,
    local_date,
    verdict,
    wall_clock_instant,
)
from cronwire.domain.cron import load_timezone, next_occurrences, occurrences_between

_DAY = timedelta(days=1)
_TICK = timedelta(microseconds=1)
# A local day's instants lie within this of its midnights read at the day's offsets.
_MARGIN = timedelta(hours=3)
# The occurrences of one excluded day that can be shifted (a 1-second cron has 86,400).
_PER_DAY = 86_400 + 3 * 3600 * 2


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


def calendar_skips(exclusions: Exclusions, timezone: str,
                   instants: list[datetime]) -> frozenset[datetime]:
    """The effective instants that are calendar skips (written ``skipped``, never
    delivered): those whose local date is excluded."""
    if not exclusions:
        return frozenset()
    tz = load_timezone(timezone)
    return frozenset(t for t in instants if exclusions.excludes(local_date(t, tz)))
