"""MemoryScheduleStore's apply (ADR 0057): the Postgres store's, over memory."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import replace

from cronwire.adapters.memory.database import MemoryDatabase
from cronwire.domain.apply_plan import ApplyPlan
from cronwire.domain.errors import NotFound
from cronwire.domain.schedules import ScheduleRecord
from cronwire.ports.tenant import ApplyAdmission, ApplyDecider, ScheduleStore


async def apply_in_memory(
    store: ScheduleStore, db: MemoryDatabase, tenant_id: uuid.UUID, keys: Sequence[str],
    decide: ApplyDecider, admit: ApplyAdmission, *, prune_managed_by: str | None,
    dry_run: bool,
) -> tuple[ApplyPlan, dict[str, ScheduleRecord]]:
    """The Postgres store's apply over memory: decided on one read, then written
    through create, update, set_paused and delete. Unlike Postgres, a write refused
    midway (a key another schedule took meanwhile) keeps the writes before it; the
    contract suite holds both stores to the same plans and results."""
    if tenant_id not in db.tenants:
        raise NotFound(f"tenant {tenant_id} not found")
    listed = set(keys)
    mine = await store.list(tenant_id, after=None, limit=len(db.schedules) + 1)
    current = [s for s in mine if s.spec.key in listed or (
        prune_managed_by is not None and s.spec.managed_by == prune_managed_by)]
    plan = await decide(current, len(mine))
    await admit(plan)
    after = plan.records_read()
    if dry_run:
        return plan, after
    for record in plan.deleted:
        await store.delete(tenant_id, record.id)
    for revision in plan.updated:
        key = revision.record.spec.key or ""
        made = revision.record
        if revision.spec_changed:
            made = await store.update(tenant_id, made.id, revision.revise)
        if revision.paused is not None:
            made = await store.set_paused(tenant_id, made.id, revision.paused)
        after[key] = made
    for creation in plan.created:
        desired = creation.desired
        made = await store.create(tenant_id, desired.spec, paused=bool(desired.paused),
                                 signing_secret=creation.signing_secret,
                                 max_schedules=len(mine) + len(plan.created) + 1)
        after[desired.key] = replace(made, signing_secret=creation.signing_secret)
    return plan, after
