"""Backfill: a schedule's occurrences in ``[start, end)``, as runs it never had. Pure.

The occurrences are the planner's own (the same cron walk, time zone and DST rules, the
same ``starts_at``/``ends_at`` bounds, ``at`` for a one-time schedule), so a backfill of a
window and the runs the planner would have written for it are the same instants. The
store inserts one run per occurrence with ``ON CONFLICT DO NOTHING``: an occurrence that
already has a run (planned, manual or an earlier backfill) keeps it.

Limits, each a 422 naming what to change: at most :data:`MAX_BACKFILL` occurrences per
request; ``end`` not in the future (occurrences from now on are the planner's); ``start``
not before the oldest run partition (retention dropped that history, and a row there has
nowhere to go).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from cronwire.domain.calendar_walk import effective_between
from cronwire.domain.calendars import NO_EXCLUSIONS, Exclusions, is_calendar_skip
from cronwire.domain.cron import load_timezone
from cronwire.domain.errors import (
    InvalidCron,
    InvalidRRule,
    InvalidTimezone,
    LimitExceeded,
    RuleViolation,
)
from cronwire.domain.model import OverlapPolicy
from cronwire.domain.schedules import ScheduleSpec

MAX_BACKFILL = 10_000
FIRST_SHOWN = 100
_TICK = timedelta(microseconds=1)


@dataclass(frozen=True, slots=True)
class BackfillRequest:
    start: datetime
    end: datetime
    overlap_policy: OverlapPolicy | None = None  # None: the schedule's own
    dry_run: bool = False


@dataclass(frozen=True, slots=True)
class BackfillPlan:
    occurrences: list[datetime]  # oldest first
    overlap_policy: OverlapPolicy  # what the backfill's runs are gated by


@dataclass(frozen=True, slots=True)
class BackfillResult:
    occurrences: int
    created: int  # runs written (0 for a dry run)
    existing: int  # occurrences that already had a run, left as they are
    first: list[datetime]  # the first FIRST_SHOWN occurrences
    dry_run: bool = False
    # A dry run: the limit the real backfill would be refused by (domain.volume.LIMIT)
    over_limit: str | None = None


def occurrences_in(spec: ScheduleSpec, start: datetime, end: datetime,
                   limit: int, exclusions: Exclusions = NO_EXCLUSIONS) -> list[datetime]:
    """The schedule's occurrences in ``[start, end)`` within its bounds, at most ``limit``;
    with ``exclusions``, where its calendars make them fire (shifted), none they skip."""
    if spec.timetable is None:
        at = spec.at
        return [at] if at is not None and start <= at < end and limit > 0 else []
    lo = start if spec.starts_at is None else max(start, spec.starts_at)
    hi = end - _TICK if spec.ends_at is None else min(end - _TICK, spec.ends_at)
    if hi < lo:
        return []
    found = effective_between(spec.timetable, spec.timezone, lo - _TICK, hi, limit, exclusions)
    if not exclusions:
        return found
    tz = load_timezone(spec.timezone)
    return [t for t in found if not is_calendar_skip(t, tz, exclusions)]


def plan_backfill(spec: ScheduleSpec, request: BackfillRequest, db_now: datetime,
                  oldest_writable: datetime | None,
                  exclusions: Exclusions = NO_EXCLUSIONS) -> BackfillPlan:
    """The occurrences to backfill, or the refusal naming the field or limit at fault.
    ``oldest_writable``: the lower bound of the run partitions (None: no partition)."""
    if not request.start < request.end:
        raise RuleViolation("end", "must be later than start")
    if request.end > db_now:
        raise RuleViolation(
            "end", f"must not be later than now ({db_now.isoformat()}): occurrences from "
            "now on are the planner's")
    if oldest_writable is None or request.start < oldest_writable:
        since = "no run partition exists" if oldest_writable is None else (
            f"runs are kept from {oldest_writable.isoformat()} on (SCHEDULER_RETENTION_MONTHS)")
        raise RuleViolation("start", f"is before the oldest run history: {since}")
    try:
        found = occurrences_in(spec, request.start, request.end, MAX_BACKFILL + 1, exclusions)
    except (InvalidCron, InvalidRRule, InvalidTimezone) as exc:  # tzdata dropped a zone
        field = "rrule" if isinstance(exc, InvalidRRule) else "cron"
        raise RuleViolation(field, f"the schedule cannot be walked: {exc}") from None
    if len(found) > MAX_BACKFILL:
        raise LimitExceeded(
            "max_backfill_occurrences", "end",
            f"[start, end) holds more than {MAX_BACKFILL:,} occurrences of this schedule; "
            f"at most {MAX_BACKFILL:,} per request: split the window "
            f"(the first {MAX_BACKFILL:,} end at {found[MAX_BACKFILL - 1].isoformat()})")
    return BackfillPlan(found, request.overlap_policy or spec.overlap_policy)
