"""MemoryScheduleStore: schedules as tenants edit them, confined to one tenant per call.

Fire times come from :mod:`cronwire.domain.schedule_rules` with the fake database's
clock, as the Postgres store reads ``now()`` inside its transaction."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta

from cronwire.adapters.memory.database import RUNNABLE, MemoryDatabase, MemoryRun, MemorySchedule
from cronwire.adapters.memory.flow_gate import release_holds, sync_keys
from cronwire.adapters.memory.schedule_apply import apply_in_memory
from cronwire.domain.apply_plan import ApplyPlan
from cronwire.domain.errors import LimitExceeded, NotFound, StateConflict, StorageError
from cronwire.domain.history import RunView
from cronwire.domain.model import RunStatus, ScheduleStatus, Trigger
from cronwire.domain.schedule_rules import first_fire, rescheduled_next_fire, status_after_edit
from cronwire.domain.schedules import ScheduleRecord, ScheduleSpec, TenantLimits
from cronwire.ports.tenant import ApplyAdmission, ApplyDecider

MANUAL_INSERT_TRIES = 5


def _record(s: MemorySchedule) -> ScheduleRecord:
    return ScheduleRecord(
        id=s.id, tenant_id=s.tenant_id, spec=s.spec, status=s.status,
        next_fire_at=s.next_fire_at, last_fire_at=s.last_fire_at, created_at=s.created_at,
        updated_at=s.updated_at, previous_secret_expires_at=s.previous_secret_expires_at,
        signing_secret=s.signing_secret, runs_planned=s.runs_planned,
        consecutive_failures=s.consecutive_failures, paused_reason=s.paused_reason,
        paused_at=s.paused_at,
    )


def run_view(run: MemoryRun) -> RunView:
    return RunView(
        id=run.id, schedule_id=run.schedule_id, scheduled_for=run.scheduled_for,
        status=run.status, attempt_count=run.attempt_count, fire_after=run.fire_after,
        first_attempt_at=run.first_attempt_at, finished_at=run.finished_at,
        last_status_code=run.last_status_code, last_error=run.last_error, trigger=run.trigger,
        skip_reason=run.skip_reason, replay_of=run.replay_of, replayed_by=run.replayed_by,
    )


def _unplan(
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
    taken = _unplan(db, schedule.id, now)
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


def _check_key_free(db: MemoryDatabase, tenant_id: uuid.UUID, key: str | None,
                    owner: uuid.UUID | None = None) -> None:
    """schedule_tenant_key_idx: one live schedule per (tenant, key)."""
    if key is None:
        return
    if any(s.tenant_id == tenant_id and s.live and s.spec.key == key and s.id != owner
           for s in db.schedules.values()):
        raise StateConflict(f"key: {key!r} is the key of another schedule of this tenant; "
                            "keys are unique among live schedules")


class MemoryScheduleStore:
    def __init__(self, db: MemoryDatabase) -> None:
        self._db = db

    def _live(self, tenant_id: uuid.UUID, schedule_id: uuid.UUID) -> MemorySchedule:
        return live_schedule(self._db, tenant_id, schedule_id)

    async def limits_and_now(
        self, tenant_id: uuid.UUID, defaults: TenantLimits
    ) -> tuple[TenantLimits, datetime]:
        tenant = self._db.tenants.get(tenant_id)
        if tenant is None:
            raise NotFound(f"tenant {tenant_id} not found")
        limits = defaults.overridden_by(
            max_schedules=tenant.max_schedules, min_interval_seconds=tenant.min_interval_seconds,
            max_body_bytes=tenant.max_body_bytes, max_headers=tenant.max_headers,
        )
        return limits, self._db.now()

    async def create(
        self, tenant_id: uuid.UUID, spec: ScheduleSpec, *, paused: bool, signing_secret: str,
        max_schedules: int,
    ) -> ScheduleRecord:
        if tenant_id not in self._db.tenants:
            raise NotFound(f"tenant {tenant_id} not found")
        live = sum(1 for s in self._db.schedules.values() if s.tenant_id == tenant_id and s.live)
        if live >= max_schedules:
            raise LimitExceeded(
                "max_schedules", None,
                f"this tenant already has {live} schedules (limit {max_schedules}); "
                "delete one first",
            )
        _check_key_free(self._db, tenant_id, spec.key)
        now = self._db.now()
        schedule = MemorySchedule(
            id=uuid.uuid4(), tenant_id=tenant_id, spec=spec, signing_secret=signing_secret,
            created_at=now, updated_at=now,
            status=ScheduleStatus.PAUSED if paused else ScheduleStatus.ACTIVE,
            next_fire_at=first_fire(spec, now), paused_at=now if paused else None,
        )
        self._db.schedules[schedule.id] = schedule
        sync_keys(self._db, tenant_id, [spec.flow_key])
        return _record(schedule)

    async def db_now(self) -> datetime:
        return self._db.now()

    async def get(self, tenant_id: uuid.UUID, schedule_id: uuid.UUID) -> ScheduleRecord:
        return _record(self._live(tenant_id, schedule_id))

    async def list(
        self, tenant_id: uuid.UUID, *, after: uuid.UUID | None, limit: int
    ) -> Sequence[ScheduleRecord]:
        floor = after or uuid.UUID(int=0)
        mine = sorted(
            (s for s in self._db.schedules.values()
             if s.tenant_id == tenant_id and s.live and s.id > floor),
            key=lambda s: s.id,
        )
        return [_record(s) for s in mine[:limit]]

    async def update(
        self, tenant_id: uuid.UUID, schedule_id: uuid.UUID,
        revise: Callable[[ScheduleSpec], ScheduleSpec],
    ) -> ScheduleRecord:
        schedule = self._live(tenant_id, schedule_id)
        spec = revise(schedule.spec)  # a domain error here leaves the row as it was
        _check_key_free(self._db, tenant_id, spec.key, schedule_id)
        now = self._db.now()
        if schedule.spec.timing_differs(spec):  # nothing more on the old timetable
            taken = _unplan(self._db, schedule_id, now)
            if taken is not None:
                schedule.last_fire_at = taken[1]
        next_fire_at = rescheduled_next_fire(
            schedule.spec, spec, schedule.next_fire_at, schedule.last_fire_at, now
        )
        schedule.status, schedule.next_fire_at = status_after_edit(
            _record(schedule), spec, next_fire_at, schedule.last_fire_at, now)
        previous = schedule.spec
        schedule.spec = spec
        schedule.updated_at = now
        _save_flow_control(self._db, schedule, previous)
        return _record(schedule)

    async def delete(self, tenant_id: uuid.UUID, schedule_id: uuid.UUID) -> int:
        """Pending and retrying runs end cancelled; running ones are marked
        cancel_requested and end cancelled instead of a retry, release or re-claim."""
        schedule = self._live(tenant_id, schedule_id)
        now = self._db.now()
        schedule.status = ScheduleStatus.DELETED
        schedule.next_fire_at = None
        schedule.updated_at = now
        count = 0
        for run in self._db.runs.values():
            if run.schedule_id != schedule_id or run.tenant_id != tenant_id:
                continue
            if run.status in RUNNABLE:
                run.status = RunStatus.CANCELLED
                run.finished_at = now
            elif run.status is not RunStatus.RUNNING:
                continue
            run.cancel_requested = True
            run.version += 1
            count += 1
        release_holds(self._db, tenant_id, [schedule.spec.flow_key])
        sync_keys(self._db, tenant_id, [schedule.spec.flow_key])
        return count

    async def set_paused(
        self, tenant_id: uuid.UUID, schedule_id: uuid.UUID, paused: bool,
        note: str | None = None,
    ) -> ScheduleRecord:
        schedule = self._live(tenant_id, schedule_id)
        if schedule.status not in (ScheduleStatus.ACTIVE, ScheduleStatus.PAUSED):
            verb = "paused" if paused else "resumed"
            raise StateConflict(
                f"schedule {schedule_id} is {schedule.status} and cannot be {verb}: it has no "
                "occurrence left; give it a new `at` or a higher `max_runs` to run it again")
        was_paused = schedule.status is ScheduleStatus.PAUSED
        schedule.updated_at = now = self._db.now()
        if paused:  # schedule_set_status, then schedule_rewind
            schedule.paused_reason = note if note is not None else (
                schedule.paused_reason if was_paused else None)
            schedule.paused_at = (schedule.paused_at or now) if was_paused else now
            schedule.status = ScheduleStatus.PAUSED
            unplan_ahead(self._db, schedule, now)
        else:
            schedule.status = ScheduleStatus.ACTIVE
            schedule.paused_reason = schedule.paused_at = None
            schedule.consecutive_failures = 0
        return _record(schedule)

    async def trigger(self, tenant_id: uuid.UUID, schedule_id: uuid.UUID, *,
                      max_pending_runs: int) -> RunView:
        """A manual run due now at an instant no cron occurrence (whole seconds) takes."""
        self._live(tenant_id, schedule_id)
        self._db.open_runs(tenant_id, max_pending_runs).check(1)
        for _ in range(MANUAL_INSERT_TRIES):
            instant = self._db.now()
            if instant.microsecond == 0:
                instant += timedelta(microseconds=1)
            run = self._db.insert_run(
                schedule_id, instant, fire_after=instant, trigger=Trigger.MANUAL
            )
            if run is not None:
                return run_view(run)
            self._db.clock.advance(1e-6)  # clock_timestamp() moves on between tries
        raise StorageError(f"no free instant for a manual run of {schedule_id}; try again")

    async def rotate_secret(
        self, tenant_id: uuid.UUID, schedule_id: uuid.UUID, new_secret: str,
        overlap_seconds: int,
    ) -> ScheduleRecord:
        schedule = self._live(tenant_id, schedule_id)
        now = self._db.now()
        schedule.previous_signing_secret = schedule.signing_secret
        schedule.previous_secret_expires_at = now + timedelta(seconds=overlap_seconds)
        schedule.signing_secret = new_secret
        schedule.updated_at = now
        return _record(schedule)


    async def get_by_key(self, tenant_id: uuid.UUID, key: str) -> ScheduleRecord:
        for schedule in self._db.schedules.values():
            if schedule.tenant_id == tenant_id and schedule.live and schedule.spec.key == key:
                return _record(schedule)
        raise NotFound(f"schedule with key {key!r} not found")

    async def apply(
        self, tenant_id: uuid.UUID, keys: Sequence[str], decide: ApplyDecider,
        admit: ApplyAdmission, *, prune_managed_by: str | None, dry_run: bool,
    ) -> tuple[ApplyPlan, dict[str, ScheduleRecord]]:
        return await apply_in_memory(self, self._db, tenant_id, keys, decide, admit,
                                     prune_managed_by=prune_managed_by, dry_run=dry_run)


def _save_flow_control(db: MemoryDatabase, schedule: MemorySchedule,
                       previous: ScheduleSpec) -> None:
    """flow_store.save_flow_control's rules: runs not started move to the new key, an
    edited flow control ends the old key's hold, both keys' limits are recomputed."""
    key, old = schedule.spec.flow_key, previous.flow_key
    if old is not None and old != key:
        for run in db.runs.values():
            if run.schedule_id == schedule.id and run.status in RUNNABLE:
                run.flow_key = key
                run.version += 1
    if old is not None and (old != key or previous.flow_control != schedule.spec.flow_control):
        release_holds(db, schedule.tenant_id, [old])
    sync_keys(db, schedule.tenant_id, [key, old])
