"""MemoryScheduleStore: schedules as tenants edit them, confined to one tenant per call.

Fire times come from :mod:`cronwire.domain.schedule_rules` with the fake database's
clock, as the Postgres store reads ``now()`` inside its transaction."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

from cronwire.adapters.memory.calendar_store import memory_exclusions
from cronwire.adapters.memory.database import RUNNABLE, MemoryDatabase, MemorySchedule
from cronwire.adapters.memory.flow_gate import release_holds, save_flow_control, sync_keys
from cronwire.adapters.memory.schedule_apply import apply_in_memory
from cronwire.adapters.memory.schedule_rows import (
    check_key_free,
    live_schedule,
    run_view,
    schedule_record,
    unplan,
    unplan_ahead,
)
from cronwire.domain.access import BY_SYSTEM, Change
from cronwire.domain.apply_plan import ApplyPlan
from cronwire.domain.audit import SEALED, Revision, diff
from cronwire.domain.errors import (
    LimitExceeded,
    NotFound,
    StateConflict,
    StorageError,
    VersionMismatch,
)
from cronwire.domain.history import RunView
from cronwire.domain.model import RunStatus, ScheduleStatus, Trigger
from cronwire.domain.schedule_definition import schedule_fields
from cronwire.domain.schedule_rules import first_fire, rescheduled_next_fire, status_after_edit
from cronwire.domain.schedules import ScheduleRecord, ScheduleSpec, TenantLimits
from cronwire.ports.tenant import ApplyAdmission, ApplyDecider

MANUAL_INSERT_TRIES = 5


def _changed(schedule: MemorySchedule, before: ScheduleRecord | None,
             also: dict[str, Any] | None = None) -> None:
    """schedule_changes.record_change without the audit row: a new version and its
    revision when anything differs."""
    after = schedule_record(schedule)
    changes = {**diff(schedule_fields(before) if before else None, schedule_fields(after)),
               **(also or {})}
    if not changes:
        return
    if before is not None:
        schedule.version += 1
    schedule.revisions.append((schedule.version, schedule.updated_at, changes, schedule.spec))


def _check_version(schedule: MemorySchedule, if_match: int | None) -> None:
    if if_match is not None and schedule.version != if_match:
        raise VersionMismatch(f"schedule {schedule.id}", if_match, schedule.version)


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
        max_schedules: int, change: Change = BY_SYSTEM,
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
        check_key_free(self._db, tenant_id, spec.key)
        exclusions = memory_exclusions(self._db, tenant_id, spec)
        now = self._db.now()
        schedule = MemorySchedule(
            id=uuid.uuid4(), tenant_id=tenant_id, spec=spec, signing_secret=signing_secret,
            created_at=now, updated_at=now,
            status=ScheduleStatus.PAUSED if paused else ScheduleStatus.ACTIVE,
            next_fire_at=first_fire(spec, now, exclusions), paused_at=now if paused else None,
        )
        self._db.schedules[schedule.id] = schedule
        sync_keys(self._db, tenant_id, [spec.flow_key])
        _changed(schedule, None)
        return schedule_record(schedule)

    async def db_now(self) -> datetime:
        return self._db.now()

    async def get(self, tenant_id: uuid.UUID, schedule_id: uuid.UUID) -> ScheduleRecord:
        return schedule_record(self._live(tenant_id, schedule_id))

    async def list(
        self, tenant_id: uuid.UUID, *, after: uuid.UUID | None, limit: int
    ) -> Sequence[ScheduleRecord]:
        floor = after or uuid.UUID(int=0)
        mine = sorted(
            (s for s in self._db.schedules.values()
             if s.tenant_id == tenant_id and s.live and s.id > floor),
            key=lambda s: s.id,
        )
        return [schedule_record(s) for s in mine[:limit]]

    async def update(
        self, tenant_id: uuid.UUID, schedule_id: uuid.UUID,
        revise: Callable[[ScheduleSpec], ScheduleSpec], *, change: Change = BY_SYSTEM,
        if_match: int | None = None, action: str = "schedule.update",
    ) -> ScheduleRecord:
        schedule = self._live(tenant_id, schedule_id)
        _check_version(schedule, if_match)
        before = schedule_record(schedule)
        spec = revise(schedule.spec)  # a domain error here leaves the row as it was
        check_key_free(self._db, tenant_id, spec.key, schedule_id)
        exclusions = memory_exclusions(self._db, tenant_id, spec)
        now = self._db.now()
        if schedule.spec.timing_differs(spec):  # nothing more on the old timetable
            taken = unplan(self._db, schedule_id, now)
            if taken is not None:
                schedule.last_fire_at = taken[1]
        next_fire_at = rescheduled_next_fire(
            schedule.spec, spec, schedule.next_fire_at, schedule.last_fire_at, now, exclusions
        )
        schedule.status, schedule.next_fire_at = status_after_edit(
            schedule_record(schedule), spec, next_fire_at, schedule.last_fire_at, now, exclusions)
        previous = schedule.spec
        schedule.spec = spec
        schedule.updated_at = now
        save_flow_control(self._db, schedule, previous)
        _changed(schedule, before)
        return schedule_record(schedule)

    async def delete(self, tenant_id: uuid.UUID, schedule_id: uuid.UUID, *,
                     change: Change = BY_SYSTEM, if_match: int | None = None) -> int:
        """Pending and retrying runs end cancelled; running ones are marked
        cancel_requested and end cancelled instead of a retry, release or re-claim."""
        schedule = self._live(tenant_id, schedule_id)
        _check_version(schedule, if_match)
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
        note: str | None = None, *, change: Change = BY_SYSTEM, if_match: int | None = None,
        resumed_at: datetime | None = None,
    ) -> ScheduleRecord:
        schedule = self._live(tenant_id, schedule_id)
        _check_version(schedule, if_match)
        before = schedule_record(schedule)
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
            if was_paused:
                schedule.resumed_at = resumed_at or now
            schedule.status = ScheduleStatus.ACTIVE
            schedule.paused_reason = schedule.paused_at = None
            schedule.consecutive_failures = 0
        _changed(schedule, before)
        return schedule_record(schedule)

    async def trigger(self, tenant_id: uuid.UUID, schedule_id: uuid.UUID, *,
                      max_pending_runs: int, change: Change = BY_SYSTEM) -> RunView:
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
        overlap_seconds: int, *, change: Change = BY_SYSTEM,
    ) -> ScheduleRecord:
        schedule = self._live(tenant_id, schedule_id)
        now = self._db.now()
        schedule.previous_signing_secret = schedule.signing_secret
        schedule.previous_secret_expires_at = now + timedelta(seconds=overlap_seconds)
        schedule.signing_secret = new_secret
        schedule.updated_at = now
        _changed(schedule, schedule_record(schedule), {"signing_secret": [SEALED, SEALED]})
        return schedule_record(schedule)

    async def revisions(self, tenant_id: uuid.UUID, schedule_id: uuid.UUID,
                        limit: int) -> Sequence[Revision]:
        schedule = self._live(tenant_id, schedule_id)
        return [Revision(version, at, BY_SYSTEM.actor.as_document(), changes)
                for version, at, changes, _ in reversed(schedule.revisions)][:limit]

    async def revision_spec(self, tenant_id: uuid.UUID, schedule_id: uuid.UUID,
                            version: int) -> ScheduleSpec:
        schedule = self._live(tenant_id, schedule_id)
        for kept, _, _, spec in schedule.revisions:
            if kept == version:
                return spec
        raise NotFound(f"schedule {schedule_id} has no version {version}")

    async def get_by_key(self, tenant_id: uuid.UUID, key: str) -> ScheduleRecord:
        for schedule in self._db.schedules.values():
            if schedule.tenant_id == tenant_id and schedule.live and schedule.spec.key == key:
                return schedule_record(schedule)
        raise NotFound(f"schedule with key {key!r} not found")

    async def apply(
        self, tenant_id: uuid.UUID, keys: Sequence[str], decide: ApplyDecider,
        admit: ApplyAdmission, *, prune_managed_by: str | None, dry_run: bool,
        change: Change = BY_SYSTEM,
    ) -> tuple[ApplyPlan, dict[str, ScheduleRecord]]:
        return await apply_in_memory(self, self._db, tenant_id, keys, decide, admit,
                                     prune_managed_by=prune_managed_by, dry_run=dry_run)

