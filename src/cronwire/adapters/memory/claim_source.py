"""MemoryClaimSource: the polling claim over a :class:`MemoryDatabase`."""

from __future__ import annotations

import asyncio
import logging

from cronwire.adapters.memory.database import RUNNABLE, MemoryDatabase
from cronwire.adapters.memory.leases import fair_candidates, take_leases
from cronwire.domain.model import ClaimBatch

log = logging.getLogger(__name__)


class MemoryClaimSource:
    name = "memory"
    claims_at_once = 1

    def __init__(self, db: MemoryDatabase) -> None:
        self._db = db

    async def claim(self, owner: str, limit: int, lease_seconds: float) -> ClaimBatch:
        if limit <= 0:
            return ClaimBatch()
        batch = take_leases(
            self._db, owner, fair_candidates(self._db, limit, self._db.now()), lease_seconds
        )
        if batch.ended:
            log.warning("ended %d expired leases instead of re-claiming them", len(batch.ended))
        return batch

    async def seconds_until_due(self) -> float | None:
        due = [r.fire_after for r in self._db.runs.values() if r.status in RUNNABLE]
        if not due:
            return None
        return (min(due) - self._db.now()).total_seconds()

    async def wait_for_work(self, seconds: float) -> None:
        await asyncio.sleep(seconds)

    async def close(self) -> None:
        return None
