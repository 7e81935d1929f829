"""Schedules as code (ADR 0057): make a tenant's schedules look like a set of
definitions, matched by ``key``. ``apply_schedules`` for many at once (the CLI's apply
and plan), ``put_schedule`` for one (PUT by key); both take the same path: validate every
definition, then one store transaction that reads what is there, decides in the domain
(off the event loop) and writes only what differs. A definition equal to the stored
schedule writes nothing at all, not even ``updated_at``.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from functools import partial

from cronwire.domain.access import BY_SYSTEM, Change
from cronwire.domain.apply_plan import (
    MAX_APPLY_SCHEDULES,
    ApplyPlan,
    Desired,
    check_unique_keys,
    plan_apply,
)
from cronwire.domain.delivery import new_signing_secret
from cronwire.domain.errors import DomainError, LimitExceeded, RuleViolation
from cronwire.domain.schedule_keys import check_key, check_managed_by
from cronwire.domain.schedule_rules import field_of, validate_spec
from cronwire.domain.schedules import ScheduleRecord, ScheduleSpec, TenantLimits
from cronwire.ports import CpuWork, OnTheLoop, ScheduleStore
from cronwire.service.schedule_commands import UrlCheck


@dataclass(frozen=True, slots=True)
class Definition:
    """One schedule as a request defines it (not yet validated); ``paused`` None: leave
    the pause as it is (a new schedule starts active)."""

    spec: ScheduleSpec
    paused: bool | None = None


@dataclass(frozen=True, slots=True)
class Applied:
    plan: ApplyPlan
    schedules: dict[str, ScheduleRecord]  # by key, as they are afterwards
    dry_run: bool


def _where(index: int | None, field: str) -> str:
    return field if index is None else f"schedules[{index}].{field}"


def refused_at(index: int | None, key: str | None, error: DomainError) -> DomainError:
    """``error`` about a field of the definition at ``index`` of an apply, its field
    prefixed with ``schedules[i].`` and its message naming the key; as is for a PUT."""
    if index is None:
        return error
    who = f"(key {key!r}) " if key else ""
    if isinstance(error, LimitExceeded):
        field = _where(index, error.field) if error.field else f"schedules[{index}]"
        return LimitExceeded(error.limit, field, f"{field} {who}{error.reason}")
    field = error.field if isinstance(error, RuleViolation) else field_of(error, "body")
    reason = error.reason if isinstance(error, RuleViolation) else (
        str(error).removeprefix(f"{field}: "))
    return RuleViolation(_where(index, field), who + reason)


def validated(definitions: Sequence[Definition], limits: TenantLimits, now: datetime,
              managed_by: str | None, *, indexed: bool) -> list[Desired]:
    """Every definition checked by the rules a create applies, its ``managed_by`` the
    request's; the first refusal names its index (``indexed``), key and field."""
    desired = []
    for index, definition in enumerate(definitions):
        at = index if indexed else None
        spec = definition.spec
        try:
            if spec.key is None:
                raise RuleViolation("key", "is required: apply matches schedules by key")
            check_key(spec.key)
            if managed_by is not None:
                if spec.managed_by not in (None, managed_by):
                    raise RuleViolation("managed_by", f"{spec.managed_by!r} differs from the "
                                        f"apply's managed_by {managed_by!r}")
                spec = replace(spec, managed_by=managed_by)
            desired.append(Desired(index, validate_spec(spec, limits, now),
                                   definition.paused))
        except DomainError as exc:
            raise refused_at(at, spec.key, exc) from None
    check_unique_keys(desired)
    return desired


async def apply_schedules(
    store: ScheduleStore, check_url: UrlCheck, defaults: TenantLimits, tenant: uuid.UUID,
    definitions: Sequence[Definition], *, managed_by: str | None, prune: bool,
    dry_run: bool, cpu: CpuWork | None = None, indexed: bool = True,
    change: Change = BY_SYSTEM,
) -> Applied:
    """Create, change and (with ``prune``) delete so that the tenant's schedules with
    these keys, and those ``managed_by`` manages, are these: all or nothing, in one
    transaction; with ``dry_run`` only say what that would do."""
    lane = cpu or OnTheLoop()
    if len(definitions) > MAX_APPLY_SCHEDULES:
        raise RuleViolation("schedules", f"at most {MAX_APPLY_SCHEDULES:,} per apply, got "
                            f"{len(definitions):,}")
    if managed_by is not None:
        check_managed_by(managed_by)
    if prune and managed_by is None:
        raise RuleViolation("prune", "needs managed_by: prune deletes the schedules of that "
                            "managed_by that the apply does not list")
    limits, now = await store.limits_and_now(tenant, defaults)
    desired = await lane.run(partial(validated, definitions, limits, now, managed_by,
                                     indexed=indexed))

    async def decide(current: Sequence[ScheduleRecord], live: int) -> ApplyPlan:
        return await lane.run(partial(
            plan_apply, current, desired, managed_by=managed_by, prune=prune, live=live,
            max_schedules=limits.max_schedules, new_secret=new_signing_secret))

    async def admit(plan: ApplyPlan) -> None:
        """The address policy for each target URL the apply writes anew (an unchanged
        URL passed it when it was written)."""
        urls: dict[str, tuple[int, str | None]] = {
            c.desired.spec.target.url: (c.desired.index, c.desired.key) for c in plan.created}
        for revision in plan.updated:
            if "target.url" in revision.changes:
                urls.setdefault(revision.spec.target.url,
                                (_index_of(desired, revision.record), revision.spec.key))
        for url, (index, key) in urls.items():
            try:
                await check_url(url)
            except DomainError as exc:
                raise refused_at(index if indexed else None, key, exc) from None

    plan, schedules = await store.apply(
        tenant, [d.key for d in desired], decide, admit,
        prune_managed_by=managed_by if prune else None, dry_run=dry_run, change=change)
    return Applied(plan, schedules, dry_run)


def _index_of(desired: Sequence[Desired], record: ScheduleRecord) -> int:
    return next((d.index for d in desired if d.key == record.spec.key), 0)


async def put_schedule(
    store: ScheduleStore, check_url: UrlCheck, defaults: TenantLimits, tenant: uuid.UUID,
    key: str, definition: Definition, cpu: CpuWork | None = None,
    change: Change = BY_SYSTEM,
) -> tuple[ScheduleRecord, bool]:
    """Create the schedule with this key, or make the one there is equal to
    ``definition`` (a replace: fields left out take their defaults). Returns it and
    whether it was created. The same definition again writes nothing."""
    check_key(key)
    if definition.spec.key not in (None, key):
        raise RuleViolation("key", f"{definition.spec.key!r} differs from the key in the "
                            f"path {key!r}")
    definition = replace(definition, spec=replace(definition.spec, key=key))
    applied = await apply_schedules(
        store, check_url, defaults, tenant, [definition], managed_by=None, prune=False,
        dry_run=False, cpu=cpu, indexed=False, change=change)
    return applied.schedules[key], bool(applied.plan.created)


async def delete_by_key(store: ScheduleStore, tenant: uuid.UUID, key: str,
                        change: Change = BY_SYSTEM) -> int:
    """Delete the tenant's live schedule with this key (as DELETE by id does)."""
    record = await store.get_by_key(tenant, check_key(key))
    return await store.delete(tenant, record.id, change=change)


async def get_by_key(store: ScheduleStore, tenant: uuid.UUID, key: str) -> ScheduleRecord:
    return await store.get_by_key(tenant, check_key(key))
