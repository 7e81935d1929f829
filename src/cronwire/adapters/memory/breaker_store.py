"""MemoryBreakerStore: circuit-breaker rows per (tenant, target key); transitions are
:mod:`cronwire.domain.breaker`'s, as in the Postgres store."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from uuid import UUID

from cronwire.adapters.memory.database import MemoryDatabase
from cronwire.domain.breaker import (
    CLOSED,
    BreakerPolicy,
    BreakerState,
    BreakerStatus,
    after_outcomes,
    outcomes_by_target,
)

Key = tuple[UUID, str]


class MemoryBreakerStore:
    def __init__(self, db: MemoryDatabase) -> None:
        self._db = db

    async def open_states(self, keys: Sequence[Key]) -> tuple[datetime, dict[Key, BreakerState]]:
        rows = self._db.breakers
        return self._db.now(), {
            key: rows[key] for key in keys
            if key in rows and rows[key].status is not BreakerStatus.CLOSED
        }

    async def try_probe(self, key: Key, owner: str, probe_seconds: float) -> bool:
        state = self._db.breakers.get(key)
        now = self._db.now()
        if state is None:
            return False
        cooled = (state.status is BreakerStatus.OPEN and state.opened_until is not None
                  and state.opened_until <= now)
        vacant = state.status is BreakerStatus.HALF_OPEN and (
            state.probe_expires_at is None or state.probe_expires_at <= now)
        if not (cooled or vacant):
            return False
        self._db.breakers[key] = BreakerState(
            status=BreakerStatus.HALF_OPEN, failures=state.failures,
            opened_until=state.opened_until, probe_by=owner,
            probe_expires_at=now + timedelta(seconds=probe_seconds),
        )
        return True

    async def record(
        self, outcomes: Sequence[tuple[UUID, str, bool]], policy: BreakerPolicy
    ) -> None:
        by_key = outcomes_by_target(outcomes)
        now = self._db.now()
        for key, seen in by_key.items():
            if key not in self._db.breakers and all(seen):
                continue  # a success on a missing row changes nothing
            before = self._db.breakers.get(key, CLOSED)
            self._db.breakers[key] = after_outcomes(before, seen, now, policy)

    async def open_count(self) -> int:
        return sum(1 for s in self._db.breakers.values() if s.status is not BreakerStatus.CLOSED)
