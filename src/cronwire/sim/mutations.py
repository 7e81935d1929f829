"""Known bug classes, put back through test hooks on the fakes, to prove the simulator
catches them (the test suite's mutation checks). Never used by ``cronwire sim`` itself.

- ``no-owner-predicate``: the terminal write matches a run by id and ``running`` only,
  without ``claimed_by`` and the lease generation (lease rule 3);
- ``no-unique-guard``: ``UNIQUE (schedule_id, scheduled_for)`` is gone;
- ``no-renewal``: a lease renewal answers "still yours" but moves no expiry (rule 2);
- ``no-flow-release``: the terminal write keeps the flow-control slot its lease held.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime
from uuid import UUID

from cronwire.adapters.memory import MemoryRun, MemoryRunStore
from cronwire.domain.model import LeaseKey, RunResolution, RunStatus

NO_OWNER_PREDICATE = "no-owner-predicate"
NO_UNIQUE_GUARD = "no-unique-guard"
NO_RENEWAL = "no-renewal"
NO_FLOW_RELEASE = "no-flow-release"
MUTATIONS = (NO_OWNER_PREDICATE, NO_UNIQUE_GUARD, NO_RENEWAL, NO_FLOW_RELEASE)


class MutatedRunStore(MemoryRunStore):
    """The memory run store with one of the run-store mutations switched on."""

    def __init__(self, db: object, mutation: str | None) -> None:
        super().__init__(db)  # type: ignore[arg-type]
        self._mutation = mutation
        self._loose = False

    def _held(self, owner: str, run_id: UUID, scheduled_for: datetime,
              generation: int) -> MemoryRun | None:
        if not self._loose:
            return super()._held(owner, run_id, scheduled_for, generation)
        run = self._db.find(run_id, scheduled_for)
        return run if run is not None and run.status is RunStatus.RUNNING else None

    async def resolve(self, owner: str, resolutions: Sequence[RunResolution]
                      ) -> dict[UUID, RunStatus]:
        if self._mutation == NO_FLOW_RELEASE:
            counts = {key: row.in_flight for key, row in self._db.flow.items()}
            landed = await super().resolve(owner, resolutions)
            for key, count in counts.items():
                self._db.flow[key].in_flight = count
            return landed
        if self._mutation != NO_OWNER_PREDICATE:
            return await super().resolve(owner, resolutions)
        self._loose = True
        try:
            # The attempt count is part of the same lost predicate: a stale write lands.
            for r in resolutions:
                run = self._db.find(r.run_id, r.scheduled_for)
                if run is not None and run.status is RunStatus.RUNNING:
                    run.attempt_count = r.attempt_count
            return await super().resolve(owner, resolutions)
        finally:
            self._loose = False

    async def renew_leases(self, owner: str, runs: Sequence[LeaseKey], lease_seconds: float,
                           started: Collection[UUID] = frozenset()) -> set[UUID]:
        if self._mutation != NO_RENEWAL:
            return await super().renew_leases(owner, runs, lease_seconds, started)
        kept = {}
        for run_id, scheduled_for, _ in runs:
            run = self._db.find(run_id, scheduled_for)
            if run is not None:
                kept[run_id] = run.claim_expires_at
        ours = await super().renew_leases(owner, runs, lease_seconds, started)
        for run_id, scheduled_for, _ in runs:
            run = self._db.find(run_id, scheduled_for)
            if run is not None and run_id in ours:
                run.claim_expires_at = kept[run_id]
        return ours
