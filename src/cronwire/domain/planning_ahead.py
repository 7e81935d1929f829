"""The idle planner's early pass (ADR 0023): ``decide`` a little ahead, but only for
schedules that fire rarely enough that writing one run early cannot write two."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timedelta

from cronwire.domain.calendar_walk import effective_next
from cronwire.domain.errors import DomainError
from cronwire.domain.model import DueSchedule, PlanDecision
from cronwire.domain.planning import Span, decide, timetable_key

_TICK = timedelta(microseconds=1)


def decide_ahead(
    schedules: Sequence[DueSchedule],
    db_now: datetime,
    writable: Span | None,
    ahead_seconds: float,
) -> PlanDecision:
    """The idle planner's early pass (ADR 0023): ``decide`` up to ``ahead_seconds``, for
    the schedules whose occurrence after ``next_fire_at`` is at least ``ahead_seconds``
    later. So it writes at most one run per schedule, and none for a schedule that fires
    more often: that one stays with the look-ahead, whatever its ``last_fire_at`` says (a
    new schedule has none; a daily pair of fires 5 s apart has a day since the last).

    Schedules it leaves out get no advance and count in ``passed_over``: a batch full of
    them is not more work due, so the planner does not tick again at once for them."""
    spaced: dict[tuple[object, ...], bool] = {}
    chosen: list[DueSchedule] = []
    for schedule in schedules:
        key = timetable_key(schedule)
        if key not in spaced:
            spaced[key] = _spaced(schedule, timedelta(seconds=ahead_seconds))
        if spaced[key]:
            chosen.append(schedule)
    decision = decide(chosen, db_now, writable, ahead_seconds)
    return replace(decision, passed_over=len(schedules) - len(chosen))


def _spaced(s: DueSchedule, gap: timedelta) -> bool:
    """True when the schedule's next two occurrences are at least ``gap`` apart (or it
    has fewer than two). A cron that no longer parses counts as spaced: ``decide`` parks it.
    A one-time schedule (``at``, no cron) has one occurrence."""
    if s.cron is None:
        return True
    cursor = s.next_fire_at if s.starts_at is None else max(s.next_fire_at, s.starts_at)
    try:
        fires = effective_next(s.cron, s.timezone, cursor - _TICK, 2, s.exclusions,
                               starts_at=s.starts_at, ends_at=s.ends_at)
    except DomainError:
        return True
    return len(fires) < 2 or fires[1] - fires[0] >= gap
