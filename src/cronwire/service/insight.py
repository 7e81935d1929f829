"""What a tenant asks about one schedule's history: its stats, and what happened to one
occurrence and why (explain)."""

from __future__ import annotations

import time
import uuid
from datetime import datetime
from functools import partial

from cronwire.domain.calendars import NO_EXCLUSIONS
from cronwire.domain.errors import NotFound, RuleViolation
from cronwire.domain.explain import (
    Explanation,
    Facts,
    calendar_verdict,
    explain,
    first_at_or_after,
)
from cronwire.domain.history import RunView
from cronwire.domain.model import run_id_for
from cronwire.domain.stats import WINDOWS, ScheduleStats
from cronwire.ports import (
    CalendarStore,
    CpuWork,
    Metrics,
    OnTheLoop,
    RunHistory,
    ScheduleStore,
    StatsReader,
)


async def schedule_stats(schedules: ScheduleStore, stats: StatsReader, tenant: uuid.UUID,
                         schedule_id: uuid.UUID, window: str,
                         metrics: Metrics | None = None) -> ScheduleStats:
    """The schedule's stats over ``window`` (a name of :data:`WINDOWS`); NotFound for a
    schedule that is not the tenant's (checked before any history is read). The queries'
    time goes to ``metrics`` (operators alert on it: it grows with a schedule's history)."""
    if window not in WINDOWS:
        raise RuleViolation("window", f"must be one of {', '.join(WINDOWS)}")
    await schedules.get(tenant, schedule_id)
    started = time.perf_counter()
    found = await stats.schedule_stats(tenant, schedule_id, window, WINDOWS[window])
    if metrics is not None:
        metrics.stats_query(time.perf_counter() - started)
    return found


async def explain_instant(schedules: ScheduleStore, runs: RunHistory, stats: StatsReader,
                          tenant: uuid.UUID, schedule_id: uuid.UUID,
                          at: datetime, cpu: CpuWork | None = None,
                          calendars: CalendarStore | None = None) -> Explanation:
    """The schedule's first occurrence at or after ``at``, its run if one was recorded
    (run ids are derived from the occurrence, so it is one lookup; a calendar's shift
    moves the occurrence first), and why. The walks (the occurrence before, up to 100,000
    steps back) run in ``cpu`` when given."""
    lane = cpu or OnTheLoop()
    record = await schedules.get(tenant, schedule_id)
    exclusions = NO_EXCLUSIONS
    if calendars is not None and record.spec.exclude_calendars:
        exclusions = await calendars.exclusions(tenant, record.spec)
    occurrence = await lane.run(partial(first_at_or_after, record, at))
    moved = calendar_verdict(record, occurrence, exclusions)
    if moved is not None:
        occurrence = moved.at
    run: RunView | None = None
    if occurrence is not None:
        try:
            run = (await runs.get(tenant, run_id_for(schedule_id, occurrence))).run
        except NotFound:
            run = None
    facts = Facts(now=await schedules.db_now(), run=run,
                  retained_since=await stats.retained_since(), exclusions=exclusions)
    return await lane.run(partial(explain, record, at, facts))
