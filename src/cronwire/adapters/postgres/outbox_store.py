"""PostgresOutboxStore: job_run.published_at as kafka mode's outbox (job_run_outbox_* in queries/job_run.sql).

The lock, the send and the mark share one transaction: a crash or a failed send before
the commit leaves the runs unpublished for the next pass (of any replica) to publish, and
a key is marked only once the broker acknowledged it. A key sent twice is harmless.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from uuid import UUID

import asyncpg

from cronwire.adapters.postgres.driver_errors import storage_errors
from cronwire.adapters.postgres.sql import queries
from cronwire.ports import RunKey

Q = queries()


class PostgresOutboxStore:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def publish_due(
        self,
        limit: int,
        send: Callable[[Sequence[tuple[UUID, datetime, UUID]]], Awaitable[Sequence[RunKey]]],
    ) -> int:
        with storage_errors("publish due runs"):
            async with self._pool.acquire() as conn, conn.transaction():
                rows = await conn.fetch(Q["job_run_outbox_take"], limit)
                if not rows:
                    return 0
                acked = await send(
                    [(row["id"], row["scheduled_for"], row["tenant_id"]) for row in rows]
                )
                if acked:
                    await conn.execute(
                        Q["job_run_outbox_mark"],
                        [run_id for run_id, _ in acked], [at for _, at in acked],
                    )
                return len(acked)

    async def seconds_until_unpublished_due(self) -> float | None:
        with storage_errors("find the next unpublished run"):
            seconds: float | None = await self._pool.fetchval(Q["job_run_outbox_next_due"])
        return seconds
