"""Explain an instant: what happened (or will happen) to a schedule's first occurrence at or
after it, in one sentence a tenant can act on (pure; the caller reads the facts).

The verdict is the run's status when a run was recorded (a skip says which policy made
it); otherwise why there is none: the schedule's bounds, its completion (``at`` or
``max_runs``), its pause and the pause note, the planner not there yet (with the jitter
offset it will be delivered at), retention, or the misfire policy. A DST rule that moved or dropped the local time asked about is said first, by
the same rule the planner applies (:mod:`cronwire.domain.dst`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from cronwire.domain.calendars import NO_EXCLUSIONS, Exclusions, Verdict
from cronwire.domain.calendars import verdict as calendar_of
from cronwire.domain.cron import load_timezone, next_occurrences, occurrences_between
from cronwire.domain.explain_dst import asked_instant, dst_note
from cronwire.domain.flow_control import effective_key
from cronwire.domain.history import RunView
from cronwire.domain.jitter import jitter_ms
from cronwire.domain.model import RunStatus, ScheduleStatus, SkipReason
from cronwire.domain.schedules import ScheduleRecord, ScheduleSpec

_MICRO = timedelta(microseconds=1)
# How far back the previous occurrence is looked for, widening until one is found.
_LOOKBACK = (timedelta(hours=1), timedelta(days=1), timedelta(days=32), timedelta(days=366),
             timedelta(days=5 * 366))


@dataclass(frozen=True, slots=True)
class Facts:
    """What the store knows, read by the caller at the database's ``now``."""

    now: datetime
    run: RunView | None  # the occurrence's run, if one was recorded
    retained_since: datetime | None  # the oldest run history kept (retention)
    exclusions: Exclusions = NO_EXCLUSIONS  # the dates its calendars exclude (ADR 0064)


@dataclass(frozen=True, slots=True)
class Explanation:
    occurrence: datetime | None
    verdict: str
    reason: str
    run: RunView | None
    previous_occurrence: datetime | None
    next_occurrence: datetime | None


def _iso(instant: datetime) -> str:
    return instant.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _local(instant: datetime, timezone: str) -> str:
    return instant.astimezone(load_timezone(timezone)).strftime("%Y-%m-%d %H:%M:%S %Z")


def first_at_or_after(record: ScheduleRecord, at: datetime) -> datetime | None:
    """The cron's first occurrence at or after ``at`` (bounds not applied: the verdict
    says when starts_at or ends_at rules it out); a one-time schedule's ``at`` if not
    before it. ``at`` written as a skipped wall time asks from the gap it fell in."""
    if record.spec.timetable is None:
        once = record.spec.at
        return once if once is not None and once >= at else None
    at = asked_instant(record.spec.timezone, at)
    found = next_occurrences(record.spec.timetable, record.spec.timezone, at - _MICRO, 1)
    return found[0] if found else None


def _previous(record: ScheduleRecord, before: datetime) -> datetime | None:
    spec = record.spec
    if spec.timetable is None:
        return spec.at if spec.at is not None and spec.at < before else None
    for window in _LOOKBACK:
        try:
            lo = before - window
        except OverflowError:  # before year 1: nothing earlier exists
            return None
        if spec.starts_at is not None:
            lo = max(lo, spec.starts_at - _MICRO)
        found = occurrences_between(spec.timetable, spec.timezone, lo, before - _MICRO, 100_000)
        if found:
            return found[-1]
        if spec.starts_at is not None and lo >= spec.starts_at - _MICRO:
            return None
    return None


def _next(record: ScheduleRecord, after: datetime) -> datetime | None:
    spec = record.spec
    if spec.timetable is None:
        return spec.at if spec.at is not None and spec.at > after else None
    found = next_occurrences(spec.timetable, spec.timezone, after, 1, starts_at=spec.starts_at,
                             ends_at=spec.ends_at)
    return found[0] if found else None


def _jitter(record: ScheduleRecord, occurrence: datetime) -> str:
    """Where jitter moves the delivery of an occurrence, in words ('' without jitter)."""
    seconds = record.spec.jitter_seconds
    if seconds <= 0:
        return ""
    offset = timedelta(milliseconds=jitter_ms(record.id, occurrence, seconds))
    return (f"; with jitter_seconds {seconds} it is delivered at "
            f"{_iso(occurrence + offset)} ({offset.total_seconds():.3f}s after it)")


def _skip_reason(run: RunView, spec: ScheduleSpec) -> str:
    if run.skip_reason is SkipReason.OVERLAP:
        return (f"Run {run.id} was skipped by the overlap policy: the schedule's previous "
                f"run was still running or retrying when it was due (overlap_policy is now "
                f"{spec.overlap_policy.value}); buffer_one, buffer_all or cancel_other "
                f"deliver such occurrences, allow starts them alongside")
    return (f"Run {run.id} was skipped by the misfire policy {spec.misfire_policy.value}: the "
            f"occurrence was missed while no planner ran or the schedule was paused; "
            f"choose fire_all or fire_once to have missed occurrences delivered")


def _run_reason(run: RunView, spec: ScheduleSpec) -> str:
    attempts = f"{run.attempt_count} attempt{'s' if run.attempt_count != 1 else ''}"
    error = f" ({run.last_error})" if run.last_error else ""
    code = f" with HTTP {run.last_status_code}" if run.last_status_code is not None else ""
    status = run.status
    if status is RunStatus.SUCCEEDED:
        lag = ""
        if run.first_attempt_at is not None:
            lag = f", {(run.first_attempt_at - run.scheduled_for).total_seconds():.3f}s after it was due"
        return (f"Run {run.id} succeeded{code} after {attempts}; its first attempt started"
                f"{lag or ' (start not recorded)'}")
    if status is RunStatus.FAILED:
        return (f"Run {run.id} failed after {attempts}{code}{error}; GET /v1/runs/{run.id} "
                f"shows every attempt, and the target must answer 2xx")
    if status is RunStatus.RETRYING:
        return (f"Run {run.id} is retrying: attempt {run.attempt_count} failed{code}{error}; "
                f"the next attempt is due at {_iso(run.fire_after)}")
    if status is RunStatus.RUNNING:
        return f"Run {run.id} is being delivered now (attempt {run.attempt_count})"
    if status is RunStatus.PENDING:
        moved = ""
        if run.fire_after > run.scheduled_for and spec.jitter_seconds > 0:
            moved = (f" (its occurrence plus "
                     f"{(run.fire_after - run.scheduled_for).total_seconds():.3f}s of jitter)")
        keyed = ""
        if spec.flow_control is not None:  # a key at its limit holds it back (ADR 0040)
            keyed = (f", or for a slot of its flow-control key "
                     f"{effective_key(spec.flow_control, spec.target.url)!r} "
                     f"(GET /v1/flow-control shows the key's runs in flight and waiting)")
        return (f"Run {run.id} is planned and waits for its time, {_iso(run.fire_after)}"
                f"{moved}, or for a free executor{keyed}")
    if status is RunStatus.SKIPPED:
        return _skip_reason(run, spec)
    return f"Run {run.id} was cancelled{error}"


def calendar_verdict(record: ScheduleRecord, occurrence: datetime | None,
                     exclusions: Exclusions) -> Verdict | None:
    """What the schedule's calendars make of ``occurrence`` (None: nothing excluded)."""
    if occurrence is None or not exclusions or record.spec.timetable is None:
        return None
    found = calendar_of(occurrence, load_timezone(record.spec.timezone), exclusions)
    return found if found.calendar is not None else None


def explain(record: ScheduleRecord, at: datetime, facts: Facts) -> Explanation:
    spec = record.spec
    occurrence = first_at_or_after(record, at)
    previous = _previous(record, occurrence if occurrence is not None else at)
    following = _next(record, occurrence) if occurrence is not None else None
    note = dst_note(spec.timetable, spec.timezone, at) if spec.timetable is not None else None
    moved = calendar_verdict(record, occurrence, facts.exclusions)
    if moved is not None and moved.shifted:
        said = (f"moved: {moved.day} is in calendar {moved.calendar!r}, so calendar_policy "
                f"{spec.calendar_policy.value} fires it at {_iso(moved.at)} "
                f"({_local(moved.at, spec.timezone)})")
        note = f"{note}; {said}" if note else said[0].upper() + said[1:]
        occurrence = moved.at

    def answer(verdict: str, reason: str) -> Explanation:
        sentence = f"{note}; {reason[0].lower()}{reason[1:]}" if note else reason
        return Explanation(occurrence, verdict, sentence + ".", facts.run, previous, following)

    if moved is not None and moved.skip:
        recorded = (f"run {facts.run.id} is recorded skipped (skip_reason calendar)"
                    if facts.run is not None else "it is recorded as a skipped run when planned"
                    if occurrence is not None and occurrence > facts.now
                    else "no run was recorded for it")
        return answer("skipped", f"Skipped: {moved.day} is in calendar {moved.calendar!r}; "
                      f"{recorded}; calendar_policy next_business_day or previous_business_day "
                      f"would move it to a business day instead")
    if occurrence is None and record.status is ScheduleStatus.COMPLETED:
        return answer("completed", _completed(record))
    if occurrence is None:
        if spec.timetable is None:
            return answer("no_run_recorded",
                          f"A one-time schedule fires once, at {_iso(spec.at or at)}, which "
                          f"is before this instant")
        return answer("after_ends_at" if spec.ends_at is not None else "no_run_recorded",
                      "The cron expression has no occurrence after this instant")
    if facts.run is not None:
        return answer(facts.run.status.value, _run_reason(facts.run, spec))
    if spec.starts_at is not None and occurrence < spec.starts_at:
        return answer("before_starts_at",
                      f"It is before the schedule's starts_at, {_iso(spec.starts_at)}; the "
                      f"first occurrence in its bounds is "
                      f"{_iso(following) if following else 'none'}")
    if spec.ends_at is not None and occurrence > spec.ends_at:
        return answer("after_ends_at",
                      f"It is after the schedule's ends_at, {_iso(spec.ends_at)}: nothing "
                      f"fires after that; PATCH ends_at to extend it")
    if record.status is ScheduleStatus.COMPLETED and (
            record.last_fire_at is None or occurrence > record.last_fire_at):
        return answer("completed", _completed(record))
    if record.status is ScheduleStatus.PAUSED and (
            record.next_fire_at is None or occurrence >= record.next_fire_at):
        return answer("paused",
                      f"The schedule is paused{_pause_note(record)}, so {_iso(occurrence)} "
                      f"is not planned; resume it (POST /v1/schedules/{record.id}/resume), "
                      f"and its misfire policy {spec.misfire_policy.value} decides about "
                      f"what was missed")
    if facts.retained_since is not None and occurrence < facts.retained_since:
        return answer("no_run_recorded",
                      f"Its run history was removed by retention: runs before "
                      f"{_iso(facts.retained_since)} are dropped "
                      f"(SCHEDULER_RETENTION_MONTHS)")
    if occurrence < record.created_at:
        return answer("no_run_recorded",
                      f"The schedule was created at {_iso(record.created_at)}, after this "
                      f"occurrence")
    if record.next_fire_at is not None and occurrence >= record.next_fire_at:
        return answer("not_planned_yet",
                      f"Not planned yet: the planner writes each run shortly before it is "
                      f"due, and this one is due at {_iso(occurrence)} "
                      f"({_local(occurrence, spec.timezone)}){_jitter(record, occurrence)}")
    if record.next_fire_at is None and occurrence > facts.now:
        return answer("not_planned_yet", f"Not planned yet: due at {_iso(occurrence)}"
                      f"{_jitter(record, occurrence)}")
    return answer("no_run_recorded",
                  f"No run was recorded: it passed while the schedule was paused or no "
                  f"planner ran, beyond what the misfire policy {spec.misfire_policy.value} "
                  f"replays (catch-up window {spec.catchup_window_seconds}s), or before an "
                  f"edit of its timing")


def _pause_note(record: ScheduleRecord) -> str:
    """Since when and why, from the pause note or the automatic pause's explanation."""
    since = f" since {_iso(record.paused_at)}" if record.paused_at is not None else ""
    note = (record.paused_reason or "").strip().rstrip(".")
    return f"{since} ({note})" if note else since


def _completed(record: ScheduleRecord) -> str:
    spec = record.spec
    last = f", the last at {_iso(record.last_fire_at)}" if record.last_fire_at else ""
    if spec.timetable is None:
        return (f"The schedule is completed: a one-time schedule fires once, at "
                f"{_iso(spec.at or record.created_at)}, and that run was planned; nothing "
                f"fires after it")
    return (f"The schedule is completed: its max_runs ({spec.max_runs}) occurrences were "
            f"planned{last}, and nothing fires after; PATCH max_runs higher (or null) to make "
            f"it active again")
