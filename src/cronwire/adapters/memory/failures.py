"""What job_run_resolve does besides ending runs, over a :class:`MemoryDatabase`: the
cancel_other supersession check, waking the next run waiting on an overlap gate, and the
failure count that pauses a schedule at ``pause_after_failures``."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from cronwire.adapters.memory.database import RUNNABLE, MemoryDatabase, MemoryRun
from cronwire.adapters.memory.schedule_rows import unplan_ahead
from cronwire.domain.model import OverlapPolicy, RunStatus, ScheduleStatus

_ENDED = (RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELLED)


def superseded(db: MemoryDatabase, run: MemoryRun) -> bool:
    """A cancel_other run that no longer holds its schedule's gate."""
    if run.overlap_policy is not OverlapPolicy.CANCEL_OTHER:
        return False
    return db.schedules[run.schedule_id].overlap_run != (run.id, run.scheduled_for)


def wake_next(db: MemoryDatabase, ended: Sequence[MemoryRun]) -> None:
    """A gated run ended: the earliest run waiting on its schedule's gate is due now."""
    now = db.now()
    for schedule_id in {r.schedule_id for r in ended
                        if r.overlap_policy is not None and r.status in _ENDED}:
        waiting = [r for r in db.runs.values()
                   if r.schedule_id == schedule_id and r.overlap_policy is not None
                   and r.status in RUNNABLE and r.scheduled_for <= now]
        if waiting:
            first = min(waiting, key=lambda r: r.scheduled_for)
            if first.fire_after > now:
                first.fire_after = now
                first.published_at = None
                first.version += 1


def count_failures(db: MemoryDatabase, ended: Sequence[MemoryRun]) -> None:
    """Per schedule, in occurrence order: a success resets the count, a failure adds one;
    reaching ``pause_after_failures`` pauses an active schedule with a reason to act on."""
    now = db.now()
    by_schedule: dict[uuid.UUID, list[MemoryRun]] = {}
    for run in ended:
        if run.status in (RunStatus.SUCCEEDED, RunStatus.FAILED):
            by_schedule.setdefault(run.schedule_id, []).append(run)
    for schedule_id, runs in by_schedule.items():
        schedule = db.schedules[schedule_id]
        if schedule.status is ScheduleStatus.DELETED:
            continue
        failed = [r for r in sorted(runs, key=lambda r: r.scheduled_for)
                  if r.status is RunStatus.FAILED]
        count = schedule.consecutive_failures
        for run in sorted(runs, key=lambda r: r.scheduled_for):
            count = 0 if run.status is RunStatus.SUCCEEDED else count + 1
        schedule.consecutive_failures = count
        limit = schedule.spec.pause_after_failures
        if not failed or schedule.status is not ScheduleStatus.ACTIVE or limit is None \
                or count < limit:
            continue
        schedule.status = ScheduleStatus.PAUSED
        schedule.paused_at = now
        schedule.paused_reason = pause_reason(count, limit, failed[-1].last_error)
        unplan_ahead(db, schedule, now)


def pause_reason(count: int, limit: int, last_error: str | None) -> str:
    """The sentence job_run_resolve writes (its format() call), word for word."""
    return (f"Paused automatically after {count} consecutive failed runs "
            f"(pause_after_failures: {limit}). The last one failed with: "
            f"{(last_error or 'no error recorded')[:300]}. Fix the target, then resume "
            "the schedule.")
