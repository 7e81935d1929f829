"""An apply's decision (ADR 0057): given the schedules a tenant has and the ones it
wants, which to create, which to change (field by field), which to delete and how many
stay as they are. Pure, no I/O: the store runs it inside its transaction, with what it
read there, and then writes exactly what it decided.

A schedule is matched by its ``key``. ``paused`` is managed only when the desired
schedule states it (None leaves a schedule's pause as it is, so an operator's pause in
an incident survives an apply that does not mention it). Prune deletes the keyed
schedules managed by the apply's ``managed_by`` that are not listed; never a schedule of
another ``managed_by``, nor one without any.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from cronwire.domain.errors import LimitExceeded, RuleViolation
from cronwire.domain.model import ScheduleStatus
from cronwire.domain.schedule_diff import Changes, spec_changes
from cronwire.domain.schedules import ScheduleRecord, ScheduleSpec
from cronwire.domain.secrets import MASK

MAX_APPLY_SCHEDULES = 10_000


@dataclass(frozen=True, slots=True)
class Desired:
    """One schedule as the apply states it: validated, ``spec.key`` set; ``index``, its
    place in the request (errors name it)."""

    index: int
    spec: ScheduleSpec
    paused: bool | None = None

    @property
    def key(self) -> str:
        assert self.spec.key is not None
        return self.spec.key


@dataclass(frozen=True, slots=True)
class Creation:
    desired: Desired
    signing_secret: str


@dataclass(frozen=True, slots=True)
class Revision:
    """A stored schedule the apply changes: ``spec`` to write when ``spec_changed``, and
    ``paused`` (None: the pause stays as it is)."""

    record: ScheduleRecord
    spec: ScheduleSpec
    changes: Changes
    spec_changed: bool
    paused: bool | None

    def revise(self, _current: ScheduleSpec) -> ScheduleSpec:
        """The store's ``revise`` for this edit: the spec becomes the applied one."""
        return self.spec


@dataclass(frozen=True, slots=True)
class ApplyPlan:
    created: tuple[Creation, ...] = ()
    updated: tuple[Revision, ...] = ()
    deleted: tuple[ScheduleRecord, ...] = ()
    unchanged: tuple[ScheduleRecord, ...] = ()

    @property
    def changes_anything(self) -> bool:
        return bool(self.created or self.updated or self.deleted)

    def records_read(self) -> dict[str, ScheduleRecord]:
        """The listed schedules that exist, by key, as they were read (before writes)."""
        read = [*self.unchanged, *(revision.record for revision in self.updated)]
        return {r.spec.key: r for r in read if r.spec.key is not None}


def check_unique_keys(desired: Sequence[Desired]) -> None:
    """Each key at most once in one apply (else it would say two things about one)."""
    seen: dict[str, int] = {}
    for item in desired:
        first = seen.setdefault(item.key, item.index)
        if first != item.index:
            raise RuleViolation(f"schedules[{item.index}].key",
                                f"{item.key!r} is also the key of schedules[{first}]")


def _unmasked(item: Desired, stored: ScheduleSpec | None) -> ScheduleSpec:
    """A header sent as MASK (what reads show) keeps the stored value of that header."""
    headers = item.spec.target.headers
    if MASK not in headers.values():
        return item.spec
    kept = {name.lower(): value for name, value in (stored.target.headers if stored else {}).items()}
    resolved = {}
    for name, value in headers.items():
        if value == MASK:
            if name.lower() not in kept:
                raise RuleViolation(f"schedules[{item.index}].target.headers.{name}",
                                    f"(key {item.key!r}) {MASK!r} keeps a stored value, and "
                                    "this header has none")
            value = kept[name.lower()]
        resolved[name] = value
    return replace(item.spec, target=replace(item.spec.target, headers=resolved))


def _revision(record: ScheduleRecord, item: Desired) -> Revision | None:
    spec = _unmasked(item, record.spec)
    changes = spec_changes(record.spec, spec)
    spec_changed = bool(changes)
    pausable = record.status in (ScheduleStatus.ACTIVE, ScheduleStatus.PAUSED)
    is_paused = record.status is ScheduleStatus.PAUSED
    paused = None
    if item.paused is not None and pausable and item.paused != is_paused:
        paused = item.paused
        changes["paused"] = [is_paused, item.paused]
    if not changes:
        return None
    return Revision(record, spec, changes, spec_changed, paused)


def plan_apply(current: Sequence[ScheduleRecord], desired: Sequence[Desired], *,
               managed_by: str | None, prune: bool, live: int, max_schedules: int,
               new_secret: Callable[[], str]) -> ApplyPlan:
    """The apply's plan. ``current``: at least the tenant's live schedules with a listed
    key and, when pruning, those managed by ``managed_by``; ``live``: how many live
    schedules the tenant has in all (the quota counts them)."""
    by_key = {r.spec.key: r for r in current if r.spec.key is not None}
    created: list[Creation] = []
    updated: list[Revision] = []
    unchanged: list[ScheduleRecord] = []
    for item in desired:
        record = by_key.get(item.key)
        if record is None:
            spec = _unmasked(item, None)
            created.append(Creation(replace(item, spec=spec), new_secret()))
            continue
        revision = _revision(record, item)
        if revision is None:
            unchanged.append(record)
        else:
            updated.append(revision)
    deleted: list[ScheduleRecord] = []
    if prune and managed_by is not None:
        listed = {item.key for item in desired}
        deleted = sorted((r for r in current if r.spec.managed_by == managed_by
                          and r.spec.key is not None and r.spec.key not in listed),
                         key=lambda r: r.spec.key or "")
    after = live + len(created) - len(deleted)
    if created and after > max_schedules:
        raise LimitExceeded("max_schedules", None,
                            f"this apply would leave the tenant {after} schedules (limit "
                            f"{max_schedules}); it has {live}, the apply creates "
                            f"{len(created)} and deletes {len(deleted)}")
    return ApplyPlan(tuple(created), tuple(updated), tuple(deleted), tuple(unchanged))
