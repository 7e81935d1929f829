"""Rows of the in-memory schedule table as the stores read and rewind them: a run as the
history shows it, a live schedule or NotFound, a key already taken, and the take-back of
occurrences written ahead (postgres/schedule_rows.py's twin)."""

from __future__ import annotations

import uuid
from datetime import datetime

from cronwire.adapters.memory.database import MemoryDatabase, MemoryRun, MemorySchedule
from cronwire.domain.errors import NotFound, StateConflict
from cronwire.domain.history import RunView
from cronwire.domain.model import RunStatus, Trigger
from cronwire.domain.schedules import ScheduleRecord


def run_view(run: MemoryRun) -> RunView:
    return RunView(
        id=run.id, schedule_id=run.schedule_id, scheduled_for=run.scheduled_for,
        status=run.status, attempt_count=run.attempt_count, fire_after=run.fire_after,
        first_attempt_at=run.first_attempt_at, finished_at=run.finished_at,
        last_status_code=run.last_status_code, last_error=run.last_error, trigger=run.trigger,
        skip_reason=run.skip_reason, replay_of=run.replay_of, replayed_by=run.replayed_by,
    )


def unplan(
    db: MemoryDatabase, schedule_id: uuid.UUID, now: datetime
) -> tuple[datetime, datetime | None] | None:
    """job_run_unplan_ahead and job_run_last_occurrence_before."""
    taken = [key for key, run in db.runs.items()
             if run.schedule_id == schedule_id and run.trigger is Trigger.SCHEDULE
             and run.status is RunStatus.PENDING and run.scheduled_for > now]
    if not taken:
        return None
    first = min(db.runs[key].scheduled_for for key in taken)
    for key in taken:
        db.delete_run(key)
    kept = [run.scheduled_for for run in db.runs.values()
            if run.schedule_id == schedule_id and run.trigger is Trigger.SCHEDULE
            and run.scheduled_for < first]
    return first, max(kept, default=None)


def unplan_ahead(db: MemoryDatabase, schedule: MemorySchedule, now: datetime) -> None:
    """A pause's tidy-up: take back what was written ahead, rewind (schedule_rewind)."""
    taken = unplan(db, schedule.id, now)
    if taken is not None:
        first, schedule.last_fire_at = taken
        if schedule.next_fire_at is None or first < schedule.next_fire_at:
            schedule.next_fire_at = first


def live_schedule(db: MemoryDatabase, tenant_id: uuid.UUID,
                  schedule_id: uuid.UUID) -> MemorySchedule:
    """The tenant's schedule unless deleted; NotFound otherwise (a foreign one included)."""
    schedule = db.schedules.get(schedule_id)
    if schedule is None or schedule.tenant_id != tenant_id or not schedule.live:
        raise NotFound(f"schedule {schedule_id} not found")
    return schedule


def check_key_free(db: MemoryDatabase, tenant_id: uuid.UUID, key: str | None,
                    owner: uuid.UUID | None = None) -> None:
    """schedule_tenant_key_idx: one live schedule per (tenant, key)."""
    if key is None:
        return
    if any(s.tenant_id == tenant_id and s.live and s.spec.key == key and s.id != owner
           for s in db.schedules.values()):
        raise StateConflict(f"key: {key!r} is the key of another schedule of this tenant; "
                            "keys are unique among live schedules")


def schedule_record(s: MemorySchedule) -> ScheduleRecord:
    return ScheduleRecord(
        id=s.id, tenant_id=s.tenant_id, spec=s.spec, status=s.status,
        next_fire_at=s.next_fire_at, last_fire_at=s.last_fire_at, created_at=s.created_at,
        updated_at=s.updated_at, previous_secret_expires_at=s.previous_secret_expires_at,
        signing_secret=s.signing_secret, runs_planned=s.runs_planned,
        consecutive_failures=s.consecutive_failures, paused_reason=s.paused_reason,
        paused_at=s.paused_at, version=s.version,
    )
