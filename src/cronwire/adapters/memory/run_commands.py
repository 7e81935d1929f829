"""MemoryRunCommands: backfill and replay over a :class:`MemoryDatabase`, by the rules of
the Postgres statements (job_run_insert_backfill, job_run_insert_replay)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from cronwire.adapters.memory.database import MemoryDatabase, MemoryRun
from cronwire.adapters.memory.schedule_rows import live_schedule, run_view
from cronwire.domain.access import BY_SYSTEM, Change
from cronwire.domain.backfill import FIRST_SHOWN, BackfillResult
from cronwire.domain.errors import NotFound, StateConflict
from cronwire.domain.history import RunView
from cronwire.domain.model import OverlapPolicy, RunStatus, ScheduleStatus, Trigger, run_id_for
from cronwire.domain.replay import ReplayQuery
from cronwire.domain.volume import LIMIT
from cronwire.ports import BackfillPlanner

# No partitions in memory: runs are kept from the beginning of time.
OLDEST = datetime.min.replace(tzinfo=UTC)


class MemoryRunCommands:
    def __init__(self, db: MemoryDatabase) -> None:
        self._db = db

    async def backfill(
        self, tenant_id: uuid.UUID, schedule_id: uuid.UUID, plan: BackfillPlanner, *,
        dry_run: bool, max_pending_runs: int, change: Change = BY_SYSTEM,
    ) -> BackfillResult:
        schedule = live_schedule(self._db, tenant_id, schedule_id)
        now = self._db.now()
        decided = plan(schedule.spec, now, OLDEST)
        found = decided.occurrences
        existing = sum(1 for at in found if (schedule_id, at) in self._db._occurrences)
        room = self._db.open_runs(tenant_id, max_pending_runs)
        if dry_run:
            over = None if room.admits(len(found) - existing) else LIMIT
            return BackfillResult(len(found), 0, existing, found[:FIRST_SHOWN], True,
                                  over_limit=over)
        room.check(len(found) - existing)
        gated = None if decided.overlap_policy is OverlapPolicy.ALLOW else decided.overlap_policy
        created = 0
        for at in found:
            if self._db.insert_run(schedule_id, at, fire_after=now, trigger=Trigger.BACKFILL,
                                   overlap_policy=gated) is not None:
                created += 1
        return BackfillResult(len(found), created, len(found) - created, found[:FIRST_SHOWN])

    async def replay(self, tenant_id: uuid.UUID, run_id: uuid.UUID, *,
                     max_pending_runs: int, change: Change = BY_SYSTEM) -> RunView:
        matches = [r for r in self._db.runs.values()
                   if r.id == run_id and r.tenant_id == tenant_id]
        if not matches:
            raise NotFound(f"run {run_id} not found")
        original = matches[0]
        schedule = self._db.schedules[original.schedule_id]
        if schedule.status is ScheduleStatus.DELETED:
            raise StateConflict(f"run {run_id}: its schedule was deleted; nothing replays it")
        if original.status is not RunStatus.FAILED:
            raise StateConflict(f"run {run_id} is {original.status}: only failed runs (dead "
                                "letters) are replayed")
        if original.replayed_by is not None:
            raise StateConflict(f"run {run_id} was replayed already, by run "
                                f"{original.replayed_by} (replay that one if it failed)")
        self._db.open_runs(tenant_id, max_pending_runs).check(1)
        return run_view(self._replay(original))

    async def replay_failed(self, tenant_id: uuid.UUID, query: ReplayQuery, *,
                            max_pending_runs: int,
                            change: Change = BY_SYSTEM) -> list[uuid.UUID]:
        since = query.since or OLDEST
        until = query.until or datetime.max.replace(tzinfo=UTC)
        dead = sorted(
            (r for r in self._db.runs.values()
             if r.tenant_id == tenant_id and r.status is RunStatus.FAILED
             and r.replayed_by is None and since <= r.scheduled_for < until
             and (query.schedule_id is None or r.schedule_id == query.schedule_id)
             and self._db.schedules[r.schedule_id].live),
            key=lambda r: r.scheduled_for)[:query.limit]
        if dead:
            self._db.open_runs(tenant_id, max_pending_runs).check(len(dead))
        return [self._replay(run).id for run in dead]

    def _replay(self, original: MemoryRun) -> MemoryRun:
        """A new run due now at a manual instant, pointing at ``original``."""
        instant = self._db.now()
        for _ in range(1_000_000):  # bounded: each step is 1 µs, a free one is near
            if instant.microsecond and (original.schedule_id, instant) not in self._db._occurrences:
                break
            instant += timedelta(microseconds=1)
        replay = self._db.insert_run(original.schedule_id, instant, fire_after=instant,
                                     trigger=Trigger.REPLAY,
                                     run_id=run_id_for(original.schedule_id, instant))
        assert replay is not None  # the instant was free
        replay.replay_of = original.id
        replay.replay_of_scheduled_for = original.scheduled_for
        original.replayed_by = replay.id
        original.version += 1
        return replay
