"""PostgresOutboxStore: job_run.published_at as kafka mode's outbox (job_run_outbox_* in queries/job_run.sql).

A pass marks the keys it takes as published and commits before it sends them (ADR 0025).
Sending inside the transaction held each row's lock until the broker had acknowledged and
the mark was written, so every consumer that received a key first waited on that lock:
the claim by key stalled for about a pass (~0.2 s in a 100k burst) once per pass. Now a
key only reaches a consumer after its row is committed. A key the broker did not
acknowledge, or a send that failed, is unmarked again for the next pass; if the process
dies between the commit and the send, the sweeper claims those runs after its grace, as
it does for keys a broker restart lost. A key sent twice is harmless.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from uuid import UUID

import asyncpg

from cronwire.adapters.postgres.driver_errors import storage_errors
from cronwire.adapters.postgres.sql import queries
from cronwire.domain.errors import StorageError
from cronwire.ports import RunKey

Q = queries()
log = logging.getLogger(__name__)
# "No age bound" as a concrete value (about 31 years), not "$2 IS NULL OR ...", so the
# statement keeps one plan shape.
ANY_AGE_SECONDS = 1e9


class PostgresOutboxStore:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def publish_due(
        self,
        limit: int,
        send: Callable[[Sequence[tuple[UUID, datetime, UUID]]], Awaitable[Sequence[RunKey]]],
        *,
        max_age_seconds: float | None = None,
        per_tenant: int | None = None,
    ) -> int:
        age = ANY_AGE_SECONDS if max_age_seconds is None else max_age_seconds
        share = limit if per_tenant is None else per_tenant
        with storage_errors("publish due runs"):
            rows = await self._pool.fetch(Q["job_run_outbox_take"], limit, age, share)
        if not rows:
            return 0
        rows = sorted(rows, key=lambda row: (row["turn"], row["fire_after"]))
        runs = [(row["id"], row["scheduled_for"], row["tenant_id"]) for row in rows]
        try:
            acked = await send(runs)
        except Exception:
            await self._unmark([(run_id, at) for run_id, at, _ in runs])
            raise
        if len(acked) < len(runs):
            sent = set(acked)
            await self._unmark([(run_id, at) for run_id, at, _ in runs
                                if (run_id, at) not in sent])
        return len(acked)

    async def _unmark(self, keys: Sequence[RunKey]) -> None:
        """Best effort: a key left marked but unsent is the sweeper's after its grace."""
        try:
            with storage_errors("unpublish unsent keys"):
                await self._pool.execute(Q["job_run_outbox_unmark"],
                                         [run_id for run_id, _ in keys], [at for _, at in keys])
        except StorageError as exc:
            log.warning("%d unsent keys stay marked published; the sweeper claims their runs "
                        "after its grace: %s", len(keys), exc)

    async def seconds_until_unpublished_due(self) -> float | None:
        with storage_errors("find the next unpublished run"):
            seconds: float | None = await self._pool.fetchval(Q["job_run_outbox_next_due"])
        return seconds
