"""RFC 5545 recurrence rules as a schedule's timetable (ADR 0058). Pure: no clock, no I/O.

The expansion is python-dateutil's (``dateutil.rrule``); this module only decides what a
tenant may give, pins it down, and keeps every evaluation bounded:

* A rule is text of ``DTSTART``, ``RRULE`` (exactly one), ``EXDATE`` and ``RDATE`` lines.
  Every time in it is a *local* time of the schedule's zone. ``normalize_rrule`` (at
  create and update) turns UTC times (``...Z``) and a ``TZID`` equal to the zone into
  local ones and writes a missing ``DTSTART`` as midnight of the day the rule is given;
  the stored text is what every replica evaluates, so they all agree.
* DST follows cron's wall-clock rule (``dst.py``): a local time in a gap fires once at the
  gap's end, one in a fold once at its first occurrence. Rules with ``FREQ`` ``HOURLY``,
  ``MINUTELY`` or ``SECONDLY`` are interval schedules, like a cron with ``*`` in its
  minute or hour field: real time, nothing in a gap, both passes of a fold.
* Bounds. dateutil walks a rule from its ``DTSTART`` and checks ``UNTIL`` only against
  occurrences it finds. So a walk is restarted at the period holding the first instant
  asked about (every period of a rule without ``COUNT`` is the same wherever the walk
  starts), runs on the rule moved by whole 400-year cycles to just before the year 9999
  (where a rule with no occurrences stops within ~400 years of periods), looks
  ``HORIZON_YEARS`` ahead at most, and may step over at most ``MAX_SKIPPED`` occurrences
  before its first answer. DAILY-or-finer rules with day-level parts find their days a
  year at a time. ``COUNT`` is at most ``MAX_COUNT``. A rule that hits a bound while
  being evaluated raises InvalidRRule (a 422 at create time; the planner treats it as any
  unparseable timetable).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import lru_cache
from zoneinfo import ZoneInfo

from dateutil.rrule import DAILY, HOURLY, MINUTELY, MONTHLY, SECONDLY, WEEKLY, rrule

from cronwire.domain.dst import NextLocal
from cronwire.domain.rrule_text import (
    DAY_PARTS,
    FREQS,
    RuleLines,
    bad,
    day_filter_rule,
    is_rrule,
    render,
    rule_kwargs,
    split_lines,
)

__all__ = ["RRuleSpec", "is_rrule", "normalize_rrule", "parse_rrule"]

MAX_SKIPPED = 200_000  # occurrences one evaluation may step over before its first answer
# How far ahead one evaluation looks for the next occurrence. dateutil lays out a year of
# a rule in milliseconds, so a rule that never fires costs ~10 ms a decade to find out;
# cron's 100 years (dst.py) would let one request burn a second of CPU.
HORIZON_YEARS = 10
_PERIOD_SECONDS = {DAILY: 86_400, HOURLY: 3600, MINUTELY: 60, SECONDLY: 1}
_SECOND = timedelta(seconds=1)
_CYCLE_DAYS = 146_097  # 400 Gregorian years, exactly 20,871 weeks
@dataclass(frozen=True, slots=True)
class RRuleSpec:
    """A stored rule, parsed: what the cron maths walks in place of a cron pattern."""

    text: str
    rule: rrule
    exdates: tuple[datetime, ...]
    rdates: tuple[datetime, ...]
    is_wall_clock: bool
    restartable: bool  # no COUNT: a walk may start at any period
    whole_weeks: bool  # WEEKLY with BYSETPOS and BYDAY: restart at a week's WKST day
    # A DAILY-or-finer rule's day-level parts as a YEARLY rule, and the rule without
    # them, which is what runs within each day the filter keeps (_day_by_day); else None.
    day_filter: rrule | None = None
    within_day: rrule | None = None
    has_seconds: bool = True

    def walker(self) -> NextLocal:
        """A fresh ``next_local`` over this rule: the smallest occurrence (naive local)
        at or after its argument, which must not decrease from call to call."""
        stream: Iterator[datetime] | None = None
        pending: datetime | None = None
        skipped = 0

        def next_local(t: datetime) -> datetime | None:
            nonlocal stream, pending, skipped
            if stream is None:
                stream = iter(self._occurrences_from(t))
            while pending is None or pending < t:
                try:
                    pending = next(stream, None)
                except (ValueError, OverflowError) as exc:  # dateutil: "empty rule", year 9999
                    raise bad(f"cannot be evaluated: {exc}") from None
                if pending is None:
                    return None
                if pending < t:
                    skipped += 1
                    if skipped > MAX_SKIPPED:
                        raise bad(f"too dense to evaluate: more than {MAX_SKIPPED:,} "
                                   "occurrences in one period")
            return pending

        return next_local

    def _occurrences_from(self, t: datetime) -> Iterator[datetime]:
        """The rule's occurrences from ``t`` on, RDATEs merged in, EXDATEs left out, each
        once; the walk ends where no occurrence follows within HORIZON_YEARS."""
        found = self._rule_from(t)
        if self.rdates:
            found = heapq.merge(found, (d for d in self.rdates if d >= t))
        excluded = frozenset(self.exdates)
        previous = None
        for instant in found:
            if instant != previous and instant not in excluded:
                yield instant
            previous = instant

    def _rule_from(self, t: datetime) -> Iterator[datetime]:
        if not self.restartable:  # COUNT bounds it
            yield from self._span(t, None)
            return
        while True:
            last = None
            for last in self._span(t, _years_after(t, HORIZON_YEARS)):
                yield last
            if last is None:
                return
            t = last + _SECOND

    def _span(self, t: datetime, end: datetime | None) -> Iterator[datetime]:
        """Occurrences in ``[t, end]`` (a counted rule: from ``t`` on, ``end`` None).

        dateutil checks UNTIL only against occurrences it finds, so a rule with none for a
        while walks on, period by period, up to the year 9999 (seconds of CPU for a rule
        that never fires). The Gregorian calendar repeats exactly every 400 years
        (146,097 days, a whole number of weeks), so the walk runs on the rule moved by
        whole 400-year cycles to just before 9999, where that walk is short, and the
        occurrences are moved back."""
        rule = self.rule
        start: datetime = rule._dtstart
        cycles = max(0, (9998 - HORIZON_YEARS - max(t.year, start.year)) // 400)
        shift = timedelta(days=_CYCLE_DAYS * cycles)
        until = rule._until
        far_until = None if end is None else end + shift
        if until is not None:
            far_until = until + shift if far_until is None else min(far_until, until + shift)
        found: Iterator[datetime]
        if self.within_day is not None:
            assert far_until is not None  # a day-filtered rule never counts
            far = self.within_day.replace(dtstart=start + shift, until=far_until)
            found = self._day_by_day(far, t + shift, far_until)
        else:
            far = rule.replace(dtstart=start + shift, until=far_until)
            found = iter(self._restarted(far, t + shift))
        for instant in found:
            if instant - shift >= t:
                yield instant - shift

    def _day_by_day(self, rule: rrule, t: datetime, end: datetime) -> Iterator[datetime]:
        """A DAILY-or-finer rule with day-level parts (BYMONTH, BYDAY, ...), one kept day
        at a time: dateutil would step through every day, hour or minute the parts
        exclude (a minute of CPU for 'every minute of 29 February'); the YEARLY rule
        ``day_filter`` finds the next day that is kept, then ``rule`` (the rule without
        its day-level parts: they keep the day already) runs within it, up to the day's
        end, where its next occurrence, the next day's, stops it."""
        assert self.day_filter is not None
        day = datetime(t.year, t.month, t.day)
        while day <= end:
            kept = self.day_filter.replace(dtstart=day, until=end)
            day = next(iter(kept), end + _SECOND)
            if day > end:
                return
            following = day + timedelta(days=1)
            within = self._restarted(rule, day)
            for instant in within.replace(until=min(end, following - _SECOND)):
                if instant >= day:
                    yield instant
            day = following

    def _restarted(self, rule: rrule, t: datetime) -> rrule:
        """``rule`` with DTSTART moved to a period at or before the one that holds ``t``,
        a whole number of INTERVALs from the original (so every later period is the one
        the original rule has); ``rule`` itself when it counts (COUNT) or ``t`` is before
        its DTSTART."""
        start: datetime = rule._dtstart
        if not self.restartable or t <= start:
            return rule
        freq, interval = rule._freq, rule._interval
        if freq in _PERIOD_SECONDS:
            unit = _PERIOD_SECONDS[freq] * interval
            periods = int((t - start).total_seconds()) // unit
        elif freq == WEEKLY:
            periods = (t - start).days // (7 * interval)
        else:
            step = interval if freq == MONTHLY else 12 * interval
            periods = ((t.year - start.year) * 12 + t.month - start.month) // step
        # Back off while the candidate lies after t (same period, later in the day) or
        # does not exist (a 31st, a 29 February): a few steps at most.
        for k in range(periods, max(periods - 10, 0), -1):
            moved = self._period_start(rule, k)
            if moved is not None and moved <= t:
                return rule.replace(dtstart=moved)
        return rule

    def _period_start(self, rule: rrule, k: int) -> datetime | None:
        start: datetime = rule._dtstart
        freq, interval = rule._freq, rule._interval
        if freq in _PERIOD_SECONDS:
            return start + timedelta(seconds=k * _PERIOD_SECONDS[freq] * interval)
        if freq == WEEKLY:
            moved = start + timedelta(days=k * 7 * interval)
            if self.whole_weeks:  # BYSETPOS counts within the whole week: start at WKST
                moved -= timedelta(days=(moved.weekday() - rule._wkst) % 7)
            return moved if moved > start else None
        step = interval if freq == MONTHLY else 12 * interval
        total = start.month - 1 + k * step
        try:
            return start.replace(year=start.year + total // 12, month=total % 12 + 1)
        except ValueError:
            return None


def _years_after(t: datetime, years: int) -> datetime:
    return min(t + timedelta(days=years * 36_524 // 100), datetime(9998, 1, 1))


def _build(lines: RuleLines) -> RRuleSpec:
    assert lines.dtstart is not None
    parts = dict(lines.parts)
    try:
        rule = rrule(**rule_kwargs(parts), dtstart=lines.dtstart)
    except (ValueError, TypeError, OverflowError, KeyError, IndexError) as exc:
        raise bad(f"dateutil refused it: {exc}") from None
    freq = FREQS[parts["FREQ"]]
    day_parts = {k: v for k, v in parts.items() if k in DAY_PARTS}
    day_filter = within_day = None
    if freq >= DAILY and day_parts and "COUNT" not in parts:
        day_filter = day_filter_rule(day_parts)
        rest = {k: v for k, v in parts.items() if k not in DAY_PARTS}
        within_day = rrule(**rule_kwargs(rest), dtstart=lines.dtstart)
    elif freq >= HOURLY and day_parts:
        raise bad("COUNT with FREQ HOURLY, MINUTELY or SECONDLY and a day-level part "
                   f"({', '.join(day_parts)}) is not supported: give UNTIL instead")
    return RRuleSpec(
        text=render(lines), rule=rule, exdates=lines.exdates, rdates=lines.rdates,
        is_wall_clock=freq < HOURLY, restartable="COUNT" not in parts,
        whole_weeks=freq == WEEKLY and "BYSETPOS" in parts and "BYDAY" in parts,
        day_filter=day_filter, within_day=within_day,
    )


@lru_cache(maxsize=4096)
def parse_rrule(text: str) -> RRuleSpec:
    """A stored rule (local times only, DTSTART given); InvalidRRule("rrule: ...")."""
    lines = split_lines(text, None, "")
    if lines.dtstart is None:
        raise bad("a stored rule carries its DTSTART")
    return _build(lines)


def normalize_rrule(text: str, timezone: str, now: datetime) -> str:
    """The rule as it is stored: local times of ``timezone`` only, ``DTSTART`` written
    (midnight of ``now``'s local date when missing), one canonical line each. Refuses
    (InvalidRRule) what parse_rrule would. Whether it fires at all after ``now`` is the
    caller's check (it needs the DST walk)."""
    zone = ZoneInfo(timezone)
    lines = split_lines(text, zone, timezone)
    if lines.dtstart is None:
        local_now = now.astimezone(zone)
        lines = RuleLines(datetime(local_now.year, local_now.month, local_now.day), lines.parts,
                       lines.exdates, lines.rdates)
    spec = _build(lines)
    return spec.text
