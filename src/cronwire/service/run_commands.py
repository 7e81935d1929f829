"""The tenant API's use cases that make runs outside the planner: backfill a window of a
schedule's occurrences, replay one failed run, replay the dead letters in bulk.

The rules are the domain's (:mod:`cronwire.domain.backfill`, :mod:`cronwire.domain.replay`);
the backfill's decision runs inside the store's transaction, on the schedule as it is
there and on the database's clock, like the planner's ``decide``.
"""

from __future__ import annotations

import uuid
from datetime import datetime

from cronwire.domain.access import BY_SYSTEM, Change
from cronwire.domain.backfill import BackfillPlan, BackfillRequest, BackfillResult, plan_backfill
from cronwire.domain.calendars import NO_EXCLUSIONS, Exclusions
from cronwire.domain.history import RunView
from cronwire.domain.replay import ReplayQuery
from cronwire.domain.schedules import ScheduleSpec, TenantLimits
from cronwire.ports import RunCommands


async def backfill(
    commands: RunCommands, defaults: TenantLimits, tenant: uuid.UUID, schedule_id: uuid.UUID,
    request: BackfillRequest, change: Change = BY_SYSTEM,
    exclusions: Exclusions = NO_EXCLUSIONS,
) -> BackfillResult:
    """One run per occurrence of ``[start, end)`` that has none, if they fit under the
    tenant's limit on runs not yet ended (a dry run writes nothing and says what would be
    written, and whether the limit would refuse it). ``exclusions``: the dates the
    schedule's calendars exclude, read by the caller (shifted occurrences are backfilled
    where they fire, skipped ones not at all)."""

    def plan(spec: ScheduleSpec, db_now: datetime, oldest: datetime | None) -> BackfillPlan:
        return plan_backfill(spec, request, db_now, oldest, exclusions)

    return await commands.backfill(tenant, schedule_id, plan, dry_run=request.dry_run,
                                   max_pending_runs=defaults.max_pending_runs, change=change)


async def replay(commands: RunCommands, defaults: TenantLimits, tenant: uuid.UUID,
                 run_id: uuid.UUID, change: Change = BY_SYSTEM) -> RunView:
    """A failed run delivered again, as a new run due now (within the tenant's limit)."""
    return await commands.replay(tenant, run_id, max_pending_runs=defaults.max_pending_runs,
                                 change=change)


async def replay_failed(
    commands: RunCommands, defaults: TenantLimits, tenant: uuid.UUID, query: ReplayQuery,
    change: Change = BY_SYSTEM,
) -> list[uuid.UUID]:
    """The dead letters ``query`` selects, replayed if they all fit under the tenant's
    limit; the new runs' ids."""
    return await commands.replay_failed(tenant, query.checked(),
                                        max_pending_runs=defaults.max_pending_runs,
                                        change=change)
