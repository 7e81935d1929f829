"""The tenant API's use cases over the ports: each reads the tenant's limits and the
database clock, applies the domain rules and writes through the store.

The HTTP layer (``api/routes_*.py``) only translates requests into these calls and their
results into responses; everything here takes and returns domain objects, so a caller
other than FastAPI (or a test with in-memory stores) runs the same rules.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from functools import partial

from cronwire.domain.access import BY_SYSTEM, Change
from cronwire.domain.audit import Revision
from cronwire.domain.calendars import NO_EXCLUSIONS, Exclusions
from cronwire.domain.delivery import new_signing_secret
from cronwire.domain.errors import VersionMismatch
from cronwire.domain.history import RunView
from cronwire.domain.keyset import Page, page_of
from cronwire.domain.labels import check_label
from cronwire.domain.model import DueSchedule, ScheduleStatus
from cronwire.domain.planning import due_on_resume
from cronwire.domain.schedule_rules import PAUSE_NOTE_MAX_CHARS, validate_spec
from cronwire.domain.schedules import ScheduleRecord, ScheduleSpec, TenantLimits
from cronwire.ports import CpuWork, OnTheLoop, ScheduleStore

# Create-time address policy (TargetGuard.check_url): raises InvalidTarget/TargetRefused.
UrlCheck = Callable[[str], Awaitable[None]]
SpecEdit = Callable[[ScheduleSpec], ScheduleSpec]


async def create_schedule(
    store: ScheduleStore, check_url: UrlCheck, defaults: TenantLimits,
    tenant: uuid.UUID, spec: ScheduleSpec, *, paused: bool, change: Change = BY_SYSTEM,
) -> ScheduleRecord:
    """Validate against the tenant's limits at the database's now, refuse a target the
    address policy refuses, then insert (the store enforces the schedule quota)."""
    limits, now = await store.limits_and_now(tenant, defaults)
    valid = validate_spec(spec, limits, now)
    await check_url(valid.target.url)
    return await store.create(tenant, valid, paused=paused, signing_secret=new_signing_secret(),
                              max_schedules=limits.max_schedules, change=change)


async def patch_schedule(
    store: ScheduleStore, check_url: UrlCheck, defaults: TenantLimits,
    tenant: uuid.UUID, schedule_id: uuid.UUID, edit: SpecEdit, *, new_url: str | None,
    change: Change = BY_SYSTEM, if_match: int | None = None,
    action: str = "schedule.update",
) -> ScheduleRecord:
    """Apply ``edit`` to the locked current spec and validate the result; a changed target
    URL passes the address policy first. The store recomputes the next fire time, and
    refuses the edit if ``if_match`` is not the current version."""
    limits, now = await store.limits_and_now(tenant, defaults)
    if new_url is not None:
        await check_url(new_url)
    return await store.update(tenant, schedule_id,
                              lambda spec: validate_spec(edit(spec), limits, now, before=spec),
                              change=change, if_match=if_match, action=action)


async def restore_revision(
    store: ScheduleStore, check_url: UrlCheck, defaults: TenantLimits,
    tenant: uuid.UUID, schedule_id: uuid.UUID, version: int, *, change: Change = BY_SYSTEM,
    if_match: int | None = None,
) -> ScheduleRecord:
    """Make ``version``'s definition current again: a new version, validated against
    today's limits and address policy like any edit (a restored past may not fit them)."""
    old = await store.revision_spec(tenant, schedule_id, version)
    return await patch_schedule(store, check_url, defaults, tenant, schedule_id,
                                lambda _current: old, new_url=old.target.url, change=change,
                                if_match=if_match, action="schedule.restore")


async def list_revisions(store: ScheduleStore, tenant: uuid.UUID, schedule_id: uuid.UUID,
                         limit: int) -> Sequence[Revision]:
    return await store.revisions(tenant, schedule_id, limit)


async def rotate_secret(
    store: ScheduleStore, tenant: uuid.UUID, schedule_id: uuid.UUID, overlap_seconds: int,
    change: Change = BY_SYSTEM,
) -> ScheduleRecord:
    """A fresh signing secret; the previous one keeps signing for ``overlap_seconds``."""
    return await store.rotate_secret(tenant, schedule_id, new_signing_secret(), overlap_seconds,
                                     change=change)


async def list_schedules(
    store: ScheduleStore, tenant: uuid.UUID, *, after: uuid.UUID | None, limit: int,
) -> Page[ScheduleRecord]:
    return page_of(await store.list(tenant, after=after, limit=limit + 1), limit)


async def get_schedule(
    store: ScheduleStore, tenant: uuid.UUID, schedule_id: uuid.UUID,
) -> ScheduleRecord:
    """The tenant's live schedule; NotFound for a missing, deleted or foreign one."""
    return await store.get(tenant, schedule_id)


async def delete_schedule(store: ScheduleStore, tenant: uuid.UUID, schedule_id: uuid.UUID, *,
                          change: Change = BY_SYSTEM, if_match: int | None = None) -> int:
    """Soft-delete: the schedule stops firing, its runs not yet started are cancelled and a
    run in flight ends cancelled after its request; returns how many runs that touched."""
    return await store.delete(tenant, schedule_id, change=change, if_match=if_match)


async def set_paused(
    store: ScheduleStore, tenant: uuid.UUID, schedule_id: uuid.UUID, *, paused: bool,
    note: str | None = None, change: Change = BY_SYSTEM, if_match: int | None = None,
    resumed_at: datetime | None = None,
) -> ScheduleRecord:
    """Pause (nothing more is planned; ``note``, what a person wants the next reader to
    know, is kept as ``paused_reason``) or resume (the note and the failure count that may
    have paused it are cleared; ``next_fire_at`` stays where the pause left it, so the
    misfire policy decides what the missed occurrences become)."""
    if note is not None:
        check_label("note", note, PAUSE_NOTE_MAX_CHARS)
    return await store.set_paused(tenant, schedule_id, paused, note, change=change,
                                  if_match=if_match, resumed_at=resumed_at)


RESUME_COUNT_MAX = 10_000  # runs_due is counted up to this (a week of a 1-second cron is 604,800)


def runs_due_on_resume(record: ScheduleRecord, db_now: datetime,
                       exclusions: Exclusions = NO_EXCLUSIONS) -> int:
    """How many runs resuming ``record`` now makes due at once (0 unless it is paused with
    an occurrence ahead), counted up to RESUME_COUNT_MAX, on the timetable its calendars
    (``exclusions``) leave: shifted occurrences where they fire, skipped ones not at all."""
    if record.status is not ScheduleStatus.PAUSED or record.next_fire_at is None:
        return 0
    spec = record.spec
    due = DueSchedule(record.id, record.tenant_id, spec.timetable, spec.timezone, spec.misfire_policy,
                      spec.catchup_window_seconds, record.next_fire_at, record.last_fire_at,
                      spec.starts_at, spec.ends_at, at=spec.at, max_runs=spec.max_runs,
                      runs_planned=record.runs_planned, exclusions=exclusions)
    return due_on_resume(due, db_now, RESUME_COUNT_MAX)


async def resume(
    store: ScheduleStore, tenant: uuid.UUID, schedule_id: uuid.UUID, *, dry_run: bool,
    cpu: CpuWork | None = None, change: Change = BY_SYSTEM, if_match: int | None = None,
    exclusions: Exclusions = NO_EXCLUSIONS,
) -> tuple[ScheduleRecord, int]:
    """Resume (unless ``dry_run``) and say how many runs that makes due at once, counted
    before the resume, off the event loop in ``cpu`` when given (a catch-up window can
    hold thousands of occurrences)."""
    record = await store.get(tenant, schedule_id)
    now = await store.db_now()
    due = await (cpu or OnTheLoop()).run(partial(runs_due_on_resume, record, now, exclusions))
    if dry_run:
        return record, due
    if if_match is not None and record.version != if_match:  # the store checks it again
        raise VersionMismatch(f"schedule {schedule_id}", if_match, record.version)
    # The planner judges the missed occurrences at the instant they were counted at, so
    # it writes the runs_due this answer states (a minute boundary between the count and
    # the planner's pass once dropped one).
    return await set_paused(store, tenant, schedule_id, paused=False, change=change,
                            if_match=if_match, resumed_at=now), due


async def trigger_run(store: ScheduleStore, defaults: TenantLimits, tenant: uuid.UUID,
                      schedule_id: uuid.UUID, change: Change = BY_SYSTEM) -> RunView:
    """A manual run, due now, at an instant no cron occurrence can take, if the tenant's
    runs not yet ended leave room for it."""
    return await store.trigger(tenant, schedule_id, max_pending_runs=defaults.max_pending_runs,
                               change=change)
