"""Which timetable a schedule has -- exactly one of ``cron``, ``rrule`` and ``at`` -- and
whether it is acceptable (pure; ``now`` is the database clock). Refusals name the field."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from cronwire.domain.cron import load_timezone, min_gap_seconds, next_occurrences, parse_cron
from cronwire.domain.errors import InvalidCron, InvalidRRule, InvalidTimezone, RuleViolation
from cronwire.domain.rrules import HORIZON_YEARS, is_rrule, normalize_rrule
from cronwire.domain.schedules import ScheduleSpec


def check_timetable(spec: ScheduleSpec, now: datetime) -> ScheduleSpec:
    """Exactly one of ``cron``, ``rrule`` and ``at``; a one-time schedule takes no bounds
    or limit. Returns the spec with its rule normalised (rrules.normalize_rrule)."""
    given = [name for name in ("cron", "rrule", "at") if getattr(spec, name) is not None]
    if len(given) > 1:
        raise RuleViolation(given[-1], f"give one of cron, rrule and at, not {' and '.join(given)} "
                            "(at is a one-time schedule)")
    if not given:
        raise RuleViolation("cron", "give cron, rrule, or at for a one-time schedule")
    if spec.at is not None:
        for name in ("starts_at", "ends_at", "max_runs"):
            if getattr(spec, name) is not None:
                raise RuleViolation(name, "not with at: a one-time schedule fires once, at at")
        return spec
    if spec.rrule is not None:
        return replace(spec, rrule=_checked_rrule(spec.rrule, spec.timezone, now))
    assert spec.cron is not None
    if is_rrule(spec.cron):
        raise RuleViolation("cron", "this is an RFC 5545 rule: give it as rrule")
    try:
        parse_cron(spec.cron)
    except InvalidCron as exc:
        raise RuleViolation("cron", str(exc).removeprefix("cron: ")) from None
    return spec


def _checked_rrule(rule: str, timezone: str, now: datetime) -> str:
    """The rule as stored, if it is valid and fires at least once after ``now``."""
    try:
        load_timezone(timezone)
    except InvalidTimezone as exc:
        raise RuleViolation("timezone", str(exc).removeprefix("timezone: ")) from None
    try:
        text = normalize_rrule(rule, timezone, now)
        if not next_occurrences(text, timezone, now, 1):
            raise RuleViolation("rrule", f"it has no occurrence in the {HORIZON_YEARS} "
                                "years after now")
    except InvalidRRule as exc:
        raise RuleViolation("rrule", str(exc).removeprefix("rrule: ")) from None
    return text


def min_gap(spec: ScheduleSpec, now: datetime) -> float:
    assert spec.timetable is not None
    try:
        return min_gap_seconds(spec.timetable, spec.timezone, now)
    except InvalidRRule as exc:  # too dense to evaluate
        raise RuleViolation("rrule", str(exc).removeprefix("rrule: ")) from None
