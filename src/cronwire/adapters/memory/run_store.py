"""MemoryRunStore: every write on a leased run, each predicated on owner, ``running`` and
the lease generation (lease rule 3), as executor.sql's statements are."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime, timedelta
from uuid import UUID

from cronwire.adapters.memory.database import MemoryDatabase, MemoryRun, check_attempt
from cronwire.adapters.memory.failures import count_failures, superseded, wake_next
from cronwire.adapters.memory.flow_gate import give_back
from cronwire.domain.model import LeaseKey, RunResolution, RunStatus

SUPERSEDED_RETRY = ("Cancelled: superseded by a newer occurrence (overlap_policy "
                    "cancel_other); its failed attempt is recorded and not retried")


class MemoryRunStore:
    def __init__(self, db: MemoryDatabase) -> None:
        self._db = db

    def _held(self, owner: str, run_id: UUID, scheduled_for: datetime,
              generation: int) -> MemoryRun | None:
        run = self._db.find(run_id, scheduled_for)
        if (run is None or run.claimed_by != owner or run.status is not RunStatus.RUNNING
                or run.lease_generation != generation):
            return None
        return run

    async def renew_leases(
        self, owner: str, runs: Sequence[LeaseKey], lease_seconds: float,
        started: Collection[UUID] = frozenset(),
    ) -> set[UUID]:
        expires = self._db.now() + timedelta(seconds=lease_seconds)
        ours = set()
        for run_id, scheduled_for, generation in runs:
            run = self._held(owner, run_id, scheduled_for, generation)
            if run is None:
                continue
            run.claim_expires_at = expires
            run.attempt_started = run.attempt_started or run_id in started
            run.version += 1
            ours.add(run_id)
        return ours

    async def superseded(self, owner: str, runs: Sequence[LeaseKey]) -> set[UUID]:
        found = set()
        for run_id, scheduled_for, generation in runs:
            run = self._held(owner, run_id, scheduled_for, generation)
            if run is not None and superseded(self._db, run):
                found.add(run_id)
        return found

    async def resolve(
        self, owner: str, resolutions: Sequence[RunResolution]
    ) -> dict[UUID, RunStatus]:
        for resolution in resolutions:  # all or nothing, like the one statement
            if resolution.attempt is not None:
                check_attempt(resolution.attempt)
        now = self._db.now()
        landed: dict[UUID, RunStatus] = {}
        ended: list[MemoryRun] = []
        for r in resolutions:
            run = self._held(owner, r.run_id, r.scheduled_for, r.lease_generation)
            if run is None or run.attempt_count != r.attempt_count:
                continue
            retry = r.status is RunStatus.RETRYING
            # A complete answer is recorded as it came; only a retry of a superseded run
            # (or of a deleted schedule's) ends cancelled here, as in job_run_resolve.
            replaced = retry and superseded(self._db, run)
            run.status = (RunStatus.CANCELLED if replaced or (retry and run.cancel_requested)
                          else r.status)
            if retry and not run.cancel_requested:
                run.fire_after = now + timedelta(seconds=r.retry_delay_seconds or 0.0)
            run.finished_at = now if not retry or run.cancel_requested or replaced else None
            run.claim_expires_at = None
            run.last_status_code = r.last_status_code
            run.last_error = SUPERSEDED_RETRY if replaced else r.last_error
            run.published_at = None
            run.version += 1
            if r.attempt is not None:
                self._db.record_attempt(r.attempt, owner)
            give_back(self._db, run, r.hold_seconds)
            landed[run.id] = run.status
            ended.append(run)
        wake_next(self._db, ended)
        count_failures(self._db, ended)
        return landed

    async def ended_by_lease(
        self, owner: str, runs: Sequence[LeaseKey]
    ) -> dict[UUID, RunStatus]:
        ended: dict[UUID, RunStatus] = {}
        for run_id, scheduled_for, generation in runs:
            run = self._db.find(run_id, scheduled_for)
            if (run is not None and run.claimed_by == owner
                    and run.lease_generation == generation
                    and run.status is not RunStatus.RUNNING):
                ended[run_id] = run.status
        return ended

    async def fail_minimal(
        self, owner: str, run_id: UUID, scheduled_for: datetime, error: str, generation: int
    ) -> bool:
        run = self._held(owner, run_id, scheduled_for, generation)
        if run is None:
            return False
        run.status = RunStatus.FAILED
        run.finished_at = self._db.now()
        run.claim_expires_at = None
        run.last_error = error[:500]
        run.version += 1
        give_back(self._db, run)
        return True

    async def release(self, owner: str, runs: Sequence[LeaseKey]) -> int:
        return self._give_back(owner, runs, None)

    async def defer(self, owner: str, runs: Sequence[LeaseKey], until: datetime) -> int:
        return self._give_back(owner, runs, until)

    def _give_back(self, owner: str, runs: Sequence[LeaseKey], until: datetime | None) -> int:
        """The attempt the claim took is given back and the run returns to the state it
        was claimed from; a run whose schedule was deleted meanwhile ends cancelled."""
        now = self._db.now()
        count = 0
        for run_id, scheduled_for, generation in runs:
            run = self._held(owner, run_id, scheduled_for, generation)
            if run is None:
                continue
            if run.cancel_requested or superseded(self._db, run):
                run.status = RunStatus.CANCELLED
                run.finished_at = now
            else:
                if run.attempt_count <= 1:
                    run.first_attempt_at = None
                run.status = RunStatus.PENDING if run.attempt_count <= 1 else RunStatus.RETRYING
                run.attempt_count = max(run.attempt_count - 1, 0)
                run.finished_at = None
            run.fire_after = until or run.fire_after
            run.claim_expires_at = None
            run.published_at = None
            run.version += 1
            give_back(self._db, run)
            count += 1
        return count
