"""MemoryClaimSource: the polling claim over a :class:`MemoryDatabase`."""

from __future__ import annotations

import asyncio
import logging

from cronwire.adapters.memory.database import RUNNABLE, MemoryDatabase
from cronwire.adapters.memory.leases import fair_candidates, take_leases
from cronwire.domain.claim_pacing import seconds_until_next_claim
from cronwire.domain.model import ClaimBatch

log = logging.getLogger(__name__)


class MemoryClaimSource:
    name = "memory"
    claims_at_once = 1

    def __init__(self, db: MemoryDatabase) -> None:
        self._db = db
        self._empty_claims = 0  # in a row: nothing leased or ended

    async def claim(self, owner: str, limit: int, lease_seconds: float) -> ClaimBatch:
        if limit <= 0:
            return ClaimBatch()
        batch = take_leases(
            self._db, owner, fair_candidates(self._db, limit, self._db.now()), lease_seconds
        )
        self._empty_claims = 0 if batch.runs or batch.ended else self._empty_claims + 1
        if batch.ended:
            log.warning("ended %d expired leases instead of re-claiming them", len(batch.ended))
        return batch

    async def seconds_until_due(self) -> float | None:
        """job_run_next_due, paced as the Postgres source is (domain.claim_pacing)."""
        now = self._db.now()
        runnable = [(r.fire_after - now).total_seconds() for r in self._db.runs.values()
                    if r.status in RUNNABLE]
        fresh = [seconds for seconds in runnable if seconds > 0]
        return seconds_until_next_claim(min(runnable, default=None), min(fresh, default=None),
                                        self._empty_claims)

    async def wait_for_work(self, seconds: float) -> None:
        await asyncio.sleep(seconds)

    async def close(self) -> None:
        return None
