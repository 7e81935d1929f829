"""MemoryPlannerStore: stage 1's transaction over a :class:`MemoryDatabase`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta

from cronwire.adapters.memory.calendar_store import memory_exclusions
from cronwire.adapters.memory.database import MemoryDatabase, MemorySchedule
from cronwire.domain.model import (
    DueSchedule,
    PlanDecision,
    RunStatus,
    ScheduleStatus,
    SkipReason,
)
from cronwire.domain.planning import Span

# No partitions in memory: every instant has somewhere to be written.
EVERYWHERE: Span = (datetime.min.replace(tzinfo=UTC), datetime.max.replace(tzinfo=UTC))


class MemoryPlannerStore:
    def __init__(self, db: MemoryDatabase) -> None:
        self._db = db

    async def plan_due(
        self,
        *,
        limit: int,
        lookahead_seconds: float,
        decide: Callable[[Sequence[DueSchedule], datetime, Span | None], PlanDecision],
        ahead_seconds: float | None = None,
    ) -> tuple[int, int]:
        now = self._db.now()
        horizon = now + timedelta(seconds=lookahead_seconds)
        if ahead_seconds is None:
            def wanted(s: MemorySchedule) -> bool:
                return s.next_fire_at is not None and s.next_fire_at <= horizon
        else:  # schedule_claim_ahead's rule
            ahead = timedelta(seconds=ahead_seconds)

            def wanted(s: MemorySchedule) -> bool:
                return (s.next_fire_at is not None and horizon < s.next_fire_at <= now + ahead
                        and (s.last_fire_at is None or s.next_fire_at - s.last_fire_at >= ahead))
        due = sorted(
            (s for s in self._db.schedules.values()
             if s.status is ScheduleStatus.ACTIVE and wanted(s)),
            key=lambda s: (s.next_fire_at, s.id),
        )[:limit]
        decision = decide([
            DueSchedule(
                id=s.id, tenant_id=s.tenant_id, cron=s.spec.timetable, timezone=s.spec.timezone,
                misfire_policy=s.spec.misfire_policy,
                catchup_window_seconds=s.spec.catchup_window_seconds,
                next_fire_at=s.next_fire_at, last_fire_at=s.last_fire_at,
                starts_at=s.spec.starts_at, ends_at=s.spec.ends_at, at=s.spec.at,
                overlap_policy=s.spec.overlap_policy, jitter_seconds=s.spec.jitter_seconds,
                max_runs=s.spec.max_runs, runs_planned=s.runs_planned,
                exclusions=memory_exclusions(self._db, s.tenant_id, s.spec, strict=False),
                resumed_at=s.resumed_at,
            ) for s in due if s.next_fire_at is not None
        ], now, EVERYWHERE)
        inserted = 0
        for run in decision.runs:
            skipped = run.status is RunStatus.SKIPPED
            fire_after = run.scheduled_for + timedelta(milliseconds=run.jitter_ms)
            if self._db.insert_run(
                run.schedule_id, run.scheduled_for, status=run.status, trigger=run.trigger,
                run_id=run.id, fire_after=fire_after,
                overlap_policy=None if skipped else run.overlap_policy,
                skip_reason=(run.skip_reason or SkipReason.MISFIRE) if skipped else None,
            ) is not None:
                inserted += 1
        for advance in decision.advances:  # schedule_advance
            schedule = self._db.schedules[advance.schedule_id]
            schedule.next_fire_at = advance.next_fire_at
            schedule.last_fire_at = advance.last_fire_at
            schedule.updated_at = now
            schedule.runs_planned += advance.planned
            if advance.completed:
                schedule.status = ScheduleStatus.COMPLETED
        return len(due) - decision.passed_over, inserted

    async def db_now(self) -> datetime:
        return self._db.now()
