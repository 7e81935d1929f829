"""PostgresBreakerStore: circuit-breaker state shared by every replica.

Reads are one round trip per claim batch. Feeding outcomes locks the affected rows in a
fixed order, applies :func:`cronwire.domain.breaker.after_outcomes` with Postgres ``now()``
and writes back only rows that changed, all in one transaction, so concurrent replicas
count consecutive failures on one shared row instead of each on its own copy.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from uuid import UUID

import asyncpg

from cronwire.adapters.postgres.driver_errors import storage_errors
from cronwire.adapters.postgres.sql import queries
from cronwire.domain.breaker import (
    BreakerPolicy,
    BreakerState,
    BreakerStatus,
    after_outcomes,
    outcomes_by_target,
)

Q = queries()
Key = tuple[UUID, str]


def _state(row: asyncpg.Record) -> BreakerState:
    return BreakerState(
        status=BreakerStatus(row["state"]),
        failures=row["failures"],
        opened_until=row["opened_until"],
        probe_by=row["probe_by"],
        probe_expires_at=row["probe_expires_at"],
    )


def _split(keys: Sequence[Key]) -> tuple[list[UUID], list[str]]:
    return [tenant for tenant, _ in keys], [key for _, key in keys]


class PostgresBreakerStore:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def open_states(self, keys: Sequence[Key]) -> tuple[datetime, dict[Key, BreakerState]]:
        with storage_errors("read breakers"):
            rows = await self._pool.fetch(Q["target_breaker_open_states"], *_split(keys))
        states = {
            (row["tenant_id"], row["target_key"]): _state(row)
            for row in rows
            if row["tenant_id"] is not None
        }
        db_now: datetime = rows[0]["db_now"]
        return db_now, states

    async def try_probe(self, key: Key, owner: str, probe_seconds: float) -> bool:
        with storage_errors("take breaker probe"):
            won = await self._pool.fetchval(
                Q["target_breaker_try_probe"], key[0], key[1], owner, probe_seconds
            )
        return won is not None

    async def record(
        self, outcomes: Sequence[tuple[UUID, str, bool]], policy: BreakerPolicy
    ) -> None:
        by_key = outcomes_by_target(outcomes)
        failing = sorted(key for key, seen in by_key.items() if not all(seen))
        with storage_errors("record breaker outcomes"):
            if by_key and not failing:
                by_key = await self._only_dirty(by_key)
            if by_key:
                await self._apply(by_key, failing, policy)

    async def _only_dirty(self, by_key: dict[Key, list[bool]]) -> dict[Key, list[bool]]:
        """Successes change only breakers that are not clean; skip the lock otherwise."""
        rows = await self._pool.fetch(Q["target_breaker_dirty"], *_split(sorted(by_key)))
        return {(r["tenant_id"], r["target_key"]): by_key[(r["tenant_id"], r["target_key"])]
                for r in rows}

    async def _apply(
        self, by_key: dict[Key, list[bool]], failing: list[Key], policy: BreakerPolicy
    ) -> None:
        async with self._pool.acquire() as conn, conn.transaction():
            if failing:
                await conn.execute(Q["target_breaker_ensure"], *_split(failing))
            rows = await conn.fetch(Q["target_breaker_lock"], *_split(sorted(by_key)))
            changed = []
            for row in rows:
                key = (row["tenant_id"], row["target_key"])
                before = _state(row)
                after = after_outcomes(before, by_key[key], row["db_now"], policy)
                if after != before:
                    changed.append((key, after))
            if changed:
                await conn.execute(Q["target_breaker_write"], *_write_columns(changed))

    async def open_count(self) -> int:
        with storage_errors("count open breakers"):
            value = await self._pool.fetchval(Q["target_breaker_open_count"])
        return int(value or 0)


def _write_columns(changed: list[tuple[Key, BreakerState]]) -> list[list[object]]:
    return [
        [key[0] for key, _ in changed],
        [key[1] for key, _ in changed],
        [str(s.status) for _, s in changed],
        [s.failures for _, s in changed],
        [s.opened_until for _, s in changed],
        [s.probe_by for _, s in changed],
        [s.probe_expires_at for _, s in changed],
    ]
