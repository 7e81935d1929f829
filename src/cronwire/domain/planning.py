"""The planner's pure decision: which runs a batch of due schedules gets, and where each
schedule's cursor (``next_fire_at``) moves. No I/O, no clock: ``db_now`` is Postgres ``now()``.

Rules (ADR 0003, "Misfires"):

* Occurrences in ``[next_fire_at, db_now + lookahead]`` become ``pending`` runs.
* An occurrence older than ``db_now - MISFIRE_TOLERANCE`` was *missed* (the planner was down
  or the schedule paused); the schedule's misfire policy decides it:
  ``fire_all`` keeps those within ``catchup_window_seconds``, ``fire_once`` keeps only the
  latest, ``skip`` keeps none. Every dropped occurrence becomes a ``skipped`` run, so the
  tenant sees the gap in the run history, up to ``MAX_SKIPPED_ROWS`` per catch-up (the most
  recent ones; older ones leave no row).
* Nothing is written outside ``writable``, the span of existing ``job_run`` partitions
  around ``db_now`` (ADR 0010): a row without a partition would fail the whole planner
  transaction on every tick. Occurrences past its end stay ahead of the cursor until the
  partition keeper creates their month; occurrences before its start leave no row.
* Nothing older than ``RECORD_HORIZON`` is written either, except ``fire_once``'s latest
  missed occurrence (ADR 0003 promises it one run, however old): it fires as long as its
  partition exists.
* A schedule gets at most ``MAX_RUNS_PER_PASS`` pending runs per tick; if more are due its
  cursor stays in the past and the next tick picks it up again first.
* ``starts_at`` / ``ends_at`` bound every occurrence (both inclusive); a schedule with no
  further occurrence gets ``next_fire_at = None``.
* A one-time schedule (``at``) has one occurrence; ``max_runs`` caps the occurrences
  planned to fire (``runs_planned`` counts them; misfire skips do not count). Once the
  last one is written the schedule is ``completed``, in the same transaction.
* Each run carries its schedule's overlap policy (None for ``allow``) and its jitter
  offset (``domain/jitter.py``): ``fire_after = scheduled_for + offset``.
* Calendars (``exclusions``): the *effective* timetable is planned (``calendars.py``);
  an excluded date's instant is a ``skipped`` run, ``skip_reason`` ``calendar``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from cronwire.domain.calendar_walk import calendar_skips, effective_between, effective_next
from cronwire.domain.errors import DomainError
from cronwire.domain.jitter import jitter_ms
from cronwire.domain.last_occurrences import last_occurrences
from cronwire.domain.model import (
    DueSchedule,
    MisfirePolicy,
    OverlapPolicy,
    PlanDecision,
    PlannedRun,
    RunStatus,
    ScheduleAdvance,
    SkipReason,
)

# Lateness that is still "on time" (Quartz's misfireThreshold has the same default): a slow
# tick or a short restart must not turn ordinary runs into misfires.
MISFIRE_TOLERANCE = timedelta(seconds=60)
MAX_RUNS_PER_PASS = 1000
MAX_SKIPPED_ROWS = 1000
RECORD_HORIZON = timedelta(days=7)
# Rows one decision may write in total; schedules past it are left untouched (still locked
# until commit, then due again at once) so one tick's transaction stays bounded.
MAX_ROWS_PER_DECISION = 50_000

_TICK = timedelta(microseconds=1)


# [start, end) of the job_run partitions a run may be written to.
Span = tuple[datetime, datetime]


def writable_span(bounds: Iterable[Span], at: datetime) -> Span | None:
    """The contiguous run of partition ranges ``bounds`` that holds ``at``, merged; None
    when no partition holds ``at`` (nothing can be planned until one is created)."""
    merged: list[list[datetime]] = []
    for lo, hi in sorted(bounds):
        if merged and lo <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], hi)
        else:
            merged.append([lo, hi])
    for lo, hi in merged:
        if lo <= at < hi:
            return lo, hi
    return None


def decide(
    schedules: Sequence[DueSchedule],
    db_now: datetime,
    writable: Span | None,
    lookahead_seconds: float,
) -> PlanDecision:
    """Runs and cursor moves for ``schedules``, claimed at Postgres time ``db_now``, with
    every run inside ``writable`` (see :func:`writable_span`; None: nothing is writable).

    Schedules without an advance in the result are left as they were (row budget spent,
    or no partition to write to).
    """
    if writable is None:
        return PlanDecision(runs=[], advances=[])
    horizon = db_now + timedelta(seconds=lookahead_seconds)
    runs: list[PlannedRun] = []
    advances: list[ScheduleAdvance] = []
    # Schedules that share cron, zone, cursor, bounds and policy share their timetable: the
    # thundering herd (everyone on "0 * * * *") costs one cron walk per batch, not one each.
    timetables: dict[tuple[object, ...], _Timetable] = {}
    for schedule in schedules:
        if advances and len(runs) >= MAX_ROWS_PER_DECISION:
            break
        key = timetable_key(schedule)
        timetable = timetables.get(key)
        if timetable is None:
            timetable = timetables[key] = _timetable(schedule, db_now, horizon, writable)
        planned, advance = timetable.apply(schedule)
        runs.extend(planned)
        advances.append(advance)
    return PlanDecision(runs=runs, advances=advances)


def plan_schedule(
    schedule: DueSchedule, db_now: datetime, horizon: datetime, writable: Span | None = None
) -> tuple[list[PlannedRun], ScheduleAdvance]:
    """One schedule's runs up to ``horizon`` and its new cursor (``writable`` None: every
    instant has a partition)."""
    return _timetable(schedule, db_now, horizon, writable).apply(schedule)


@dataclass(frozen=True, slots=True)
class _Timetable:
    """One planning pass of a schedule, without its identity: what to write, where to go."""

    skipped: list[datetime]
    fires: list[datetime]
    next_fire: datetime | None
    parked: bool = False
    excluded: frozenset[datetime] = frozenset()  # of ``fires``: written skipped (calendar)

    def apply(self, s: DueSchedule) -> tuple[list[PlannedRun], ScheduleAdvance]:
        if self.parked:
            return [], ScheduleAdvance(s.id, None, s.last_fire_at)
        fires, next_fire = self.fires, self.next_fire
        excluded = [at for at in fires if at in self.excluded] if self.excluded else []
        fires = [at for at in fires if at not in self.excluded] if excluded else fires
        left = None if s.max_runs is None else max(0, s.max_runs - s.runs_planned)
        if left is not None and len(fires) >= left:
            fires, next_fire = fires[:left], None  # max_runs reached: nothing more
            excluded = [at for at in excluded if fires and at < fires[-1]]
        runs = [PlannedRun(s.id, s.tenant_id, at, RunStatus.SKIPPED) for at in self.skipped]
        runs += [PlannedRun(s.id, s.tenant_id, at, RunStatus.SKIPPED,
                            skip_reason=SkipReason.CALENDAR) for at in excluded]
        gated = None if s.overlap_policy is OverlapPolicy.ALLOW else s.overlap_policy
        if gated is None and not s.jitter_seconds:  # the common case, as cheap as before
            runs += [PlannedRun(s.id, s.tenant_id, at) for at in fires]
        else:
            runs += [PlannedRun(s.id, s.tenant_id, at, overlap_policy=gated,
                                jitter_ms=jitter_ms(s.id, at, s.jitter_seconds))
                     for at in fires]
        written = fires[-1:] + excluded[-1:]  # the latest occurrence with a row
        last_fire = max(written) if written else s.last_fire_at
        # Ends when nothing is left to fire: a one-time schedule once its occurrence is
        # written (fired or dropped as a misfire), a limited one at max_runs.
        completed = next_fire is None and (s.at is not None or left is not None)
        return runs, ScheduleAdvance(s.id, next_fire, last_fire, len(fires), completed)


def timetable_key(s: DueSchedule) -> tuple[object, ...]:
    return (s.cron, s.at, s.timezone, s.next_fire_at, s.starts_at, s.ends_at,
            s.misfire_policy, s.catchup_window_seconds, s.exclusions.key(), s.resumed_at)


def judged_at(s: DueSchedule, cursor: datetime, db_now: datetime) -> datetime:
    """When ``s``'s missed occurrences are judged: at its resume, which counted them
    (due_on_resume), until a pass plans past it, if within MISFIRE_TOLERANCE of it; else
    now (ADR 0003, amendment of 2026-12-06)."""
    resumed = s.resumed_at
    if resumed is not None and cursor <= resumed <= db_now < resumed + MISFIRE_TOLERANCE:
        return resumed
    return db_now


def _timetable(
    s: DueSchedule, db_now: datetime, horizon: datetime, writable: Span | None
) -> _Timetable:
    try:
        return _plan(s, db_now, horizon, writable)
    except DomainError:
        # A cron or zone that no longer parses (e.g. tzdata dropped a zone) can never fire;
        # parking it keeps it from heading every batch forever. Its history stays intact.
        return _Timetable([], [], None, parked=True)


def _plan(
    s: DueSchedule, db_now: datetime, horizon: datetime, writable: Span | None
) -> _Timetable:
    cursor = s.next_fire_at if s.starts_at is None else max(s.next_fire_at, s.starts_at)
    end = horizon if s.ends_at is None else min(horizon, s.ends_at)
    oldest = datetime.min.replace(tzinfo=db_now.tzinfo)
    if writable is not None:
        oldest = writable[0]
        end = min(end, writable[1] - _TICK)  # the next tick resumes once the month exists
    floor = max(db_now - RECORD_HORIZON, oldest)
    skipped: list[datetime] = []
    judged = judged_at(s, cursor, db_now)
    missed_before = judged - MISFIRE_TOLERANCE
    if cursor < missed_before:
        keep_from = _first_kept(s, cursor, min(missed_before, end + _TICK), judged)
        # Dropped: [cursor, keep_from), most recent first to keep, never below the floor.
        drop_until = min(keep_from, end + _TICK)
        skipped = last_occurrences(s, max(cursor, floor), drop_until, MAX_SKIPPED_ROWS)
        once = s.misfire_policy is MisfirePolicy.FIRE_ONCE and keep_from < missed_before
        # fire_once's one catch-up run is due however old it is, wherever a row can go.
        cursor = max(keep_from, oldest if once else floor)
    fires = _between(s, cursor, end, MAX_RUNS_PER_PASS + 1)
    if len(fires) > MAX_RUNS_PER_PASS:
        next_fire: datetime | None = fires[MAX_RUNS_PER_PASS]  # still due: next tick resumes
        fires = fires[:MAX_RUNS_PER_PASS]
    else:
        next_fire = _after(s, max(end, cursor - _TICK))
    excluded = calendar_skips(s.exclusions, s.timezone, fires)
    return _Timetable(skipped, fires, next_fire, excluded=excluded)


def _first_kept(
    s: DueSchedule, cursor: datetime, missed_before: datetime, db_now: datetime
) -> datetime:
    """The earliest instant whose occurrences still fire; missed ones before it are dropped.

    ``missed_before`` is exclusive: occurrences from it on are on time under every policy.
    """
    if s.misfire_policy is MisfirePolicy.FIRE_ALL:
        window_start = db_now - timedelta(seconds=s.catchup_window_seconds)
        return min(max(cursor, window_start), missed_before)
    if s.misfire_policy is MisfirePolicy.FIRE_ONCE:
        latest = last_occurrences(s, cursor, missed_before, 1)
        return latest[0] if latest else missed_before
    return missed_before  # SKIP


def _after(s: DueSchedule, after: datetime) -> datetime | None:
    """The first occurrence strictly after ``after`` (within the schedule's bounds)."""
    if s.cron is None:
        return s.at if s.at is not None and s.at > after else None
    following = effective_next(s.cron, s.timezone, after, 1, s.exclusions,
                               starts_at=s.starts_at, ends_at=s.ends_at)
    return following[0] if following else None


def _between(s: DueSchedule, lo: datetime, hi: datetime, limit: int) -> list[datetime]:
    """Occurrences in ``[lo, hi]``, oldest first, at most ``limit``."""
    if hi < lo:
        return []
    if s.cron is None:
        return [s.at] if s.at is not None and lo <= s.at <= hi and limit > 0 else []
    return effective_between(s.cron, s.timezone, lo - _TICK, hi, limit, s.exclusions)


def due_on_resume(s: DueSchedule, db_now: datetime, limit: int) -> int:
    """How many runs resuming ``s`` at ``db_now`` makes due at once (counted up to
    ``limit``): the missed occurrences its misfire policy keeps (``fire_all``: every one
    within ``catchup_window_seconds``) and those due by now, as ``_plan`` would write them,
    within ``max_runs``. The console and the CLI warn with it before a resume."""
    cursor = s.next_fire_at if s.starts_at is None else max(s.next_fire_at, s.starts_at)
    end = db_now if s.ends_at is None else min(db_now, s.ends_at)
    missed_before = db_now - MISFIRE_TOLERANCE
    if cursor < missed_before:
        keep_from = _first_kept(s, cursor, min(missed_before, end + _TICK), db_now)
        once = s.misfire_policy is MisfirePolicy.FIRE_ONCE and keep_from < missed_before
        cursor = keep_from if once else max(keep_from, db_now - RECORD_HORIZON)
    found = _between(s, cursor, end, limit)  # a calendar's skips are not delivered:
    due = len(found) - len(calendar_skips(s.exclusions, s.timezone, found))
    return due if s.max_runs is None else min(due, max(0, s.max_runs - s.runs_planned))
