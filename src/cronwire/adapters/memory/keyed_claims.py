"""Kafka mode's claims over a :class:`MemoryDatabase` (``KeyedClaimStore``), and a hint
channel (``RunHints``) a test fills by hand instead of a broker. Leases are taken by the
same rules as :class:`MemoryClaimSource`'s (``leases.take_leases``)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from datetime import timedelta

from cronwire.adapters.memory.database import RUNNABLE, MemoryDatabase
from cronwire.adapters.memory.leases import fair_candidates, take_leases
from cronwire.domain.model import ClaimBatch, RunStatus
from cronwire.ports import RunKey


class MemoryKeyedClaims:
    def __init__(self, db: MemoryDatabase) -> None:
        self._db = db

    async def claim_keys(
        self, owner: str, keys: Sequence[RunKey], lease_seconds: float
    ) -> ClaimBatch:
        """Those of ``keys`` runnable now, or holding an expired lease; a key that is
        neither is dropped (a hint is never authority)."""
        now = self._db.now()
        candidates = []
        for key in dict.fromkeys(keys):
            run = self._db.runs.get(key)
            if run is None:
                continue
            due = run.status in RUNNABLE and run.fire_after <= now and run.lease_free(now)
            expired = (run.status is RunStatus.RUNNING and run.claim_expires_at is not None
                       and run.claim_expires_at < now)
            if due or expired:
                candidates.append(run)
        candidates.sort(key=lambda r: (r.status is not RunStatus.RUNNING, r.id))
        return take_leases(self._db, owner, candidates, lease_seconds)

    async def claim_fair(
        self, owner: str, limit: int, lease_seconds: float, grace_seconds: float
    ) -> ClaimBatch:
        """job_run_claim with a grace: fair across tenants, runs due at least the grace."""
        if limit <= 0:
            return ClaimBatch()
        now = self._db.now()
        candidates = fair_candidates(self._db, limit, now, timedelta(seconds=grace_seconds))
        return take_leases(self._db, owner, candidates, lease_seconds)

    async def sweep(
        self, owner: str, limit: int, lease_seconds: float, grace_seconds: float
    ) -> ClaimBatch:
        """Expired leases, then runs due longer than ``grace_seconds``; oldest first."""
        now = self._db.now()
        overdue_at = now - timedelta(seconds=grace_seconds)
        runs = self._db.runs.values()
        expired = sorted(
            (r for r in runs if r.status is RunStatus.RUNNING
             and r.claim_expires_at is not None and r.claim_expires_at < now),
            key=lambda r: r.claim_expires_at or now)[:limit]
        overdue = sorted(
            (r for r in runs if r.status in RUNNABLE and r.fire_after <= overdue_at
             and r.lease_free(now)),
            key=lambda r: r.fire_after)[:limit]
        turns = sorted([(0, r.fire_after, r) for r in expired] + [(1, r.fire_after, r)
                                                                 for r in overdue],
                       key=lambda t: (t[0], t[1]))
        return take_leases(self._db, owner, [r for _, _, r in turns[:limit]], lease_seconds)

    async def report_overflow(self, owner: str, seconds: float) -> None:
        self._db.overflow[owner] = self._db.now() + timedelta(seconds=seconds)

    async def peer_overflowing(self, owner: str) -> bool:
        now = self._db.now()
        return any(until > now for peer, until in self._db.overflow.items() if peer != owner)


class MemoryHints:
    """Keys "delivered by a broker": ``deliver`` them; ``healthy`` plays the broker's
    reachability. Taken keys are settled by ``acknowledge`` or handed out again after
    ``rewind``."""

    def __init__(self, buffer_limit: int | None = None) -> None:
        self.healthy = True
        self._buffer_limit = buffer_limit
        self._waiting: list[RunKey] = []
        self._taken: list[RunKey] = []
        self._arrived = asyncio.Event()
        self.acknowledged: list[RunKey] = []

    def deliver(self, keys: Iterable[RunKey]) -> None:
        self._waiting.extend(keys)
        self._arrived.set()

    @property
    def backlogged(self) -> bool:
        return self._buffer_limit is not None and len(self._waiting) >= self._buffer_limit

    @property
    def buffered(self) -> int:
        return len(self._waiting)

    def take(self, limit: int) -> list[RunKey]:
        taken, self._waiting = self._waiting[:limit], self._waiting[limit:]
        self._taken.extend(taken)
        if not self._waiting:
            self._arrived.clear()
        return taken

    async def wait(self, seconds: float) -> None:
        if self._waiting:
            return
        try:
            await asyncio.wait_for(self._arrived.wait(), seconds)
        except TimeoutError:
            return

    def acknowledge(self) -> None:
        self.acknowledged.extend(self._taken)
        self._taken = []

    def rewind(self) -> None:
        self._waiting[:0] = self._taken
        self._taken = []
        if self._waiting:
            self._arrived.set()
