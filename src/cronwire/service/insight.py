"""What a tenant asks about one schedule's history: its stats (and, below, explain)."""

from __future__ import annotations

import uuid

from cronwire.domain.errors import RuleViolation
from cronwire.domain.stats import WINDOWS, ScheduleStats
from cronwire.ports import ScheduleStore, StatsReader


async def schedule_stats(schedules: ScheduleStore, stats: StatsReader, tenant: uuid.UUID,
                         schedule_id: uuid.UUID, window: str) -> ScheduleStats:
    """The schedule's stats over ``window`` (a name of :data:`WINDOWS`); NotFound for a
    schedule that is not the tenant's (checked before any history is read)."""
    if window not in WINDOWS:
        raise RuleViolation("window", f"must be one of {', '.join(WINDOWS)}")
    await schedules.get(tenant, schedule_id)
    return await stats.schedule_stats(schedule_id, window, WINDOWS[window])
