"""Partition upkeep and fleet gauges in Postgres (the MaintenanceStore port)."""

from __future__ import annotations

import hashlib
from datetime import datetime

import asyncpg

from cronwire.adapters.postgres.driver_errors import storage_errors
from cronwire.adapters.postgres.sql import queries, rows_affected
from cronwire.domain.client_tls import tls_expiry_from_text

Q = queries()
KEEPER_LOCK = int.from_bytes(hashlib.sha256(b"cronwire.partitions").digest()[:8], "big", signed=True)


async def _drop_expired_audit(conn: asyncpg.Connection, retention_days: int) -> list[str]:
    """Detach (concurrently, outside a transaction block) and drop the audit log's months
    past retention; finish a detach an earlier pass left pending."""
    dropped: list[str] = []
    for row in await conn.fetch(Q["audit_event_partition_pending_detach"]):
        await conn.execute(row["finalize_sql"])
        await conn.execute(row["drop_sql"])
        dropped.append(row["partition"])
    for row in await conn.fetch(Q["audit_event_partition_expired"], retention_days):
        await conn.execute(row["detach_sql"])
        await conn.execute(row["drop_sql"])
        dropped.append(row["partition"])
    return dropped


class PostgresMaintenanceStore:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def maintain_partitions(self, months_ahead: int, retention_months: int) -> tuple[int, list[str]]:
        """Create partitions for every month retention keeps and up to ``months_ahead``
        past this one, and drop those past retention, under an
        advisory lock; returns (created, dropped). Another replica holding the lock: (0, [])."""
        with storage_errors("partition maintenance"):
            async with self._pool.acquire() as conn:
                if not await conn.fetchval(Q["advisory_try_lock"], KEEPER_LOCK):
                    return 0, []
                try:
                    created = await conn.fetchval(Q["job_run_partition_ensure"], months_ahead,
                                                  retention_months)
                    dropped: list[str] = []
                    for row in await conn.fetch(Q["job_run_partition_pending_detach_statements"], retention_months):
                        await conn.execute(row["finalize_sql"])
                        await conn.execute(row["drop_sql"])
                        dropped.append(row["partition"])
                    for row in await conn.fetch(Q["job_run_partition_expired_detach_statements"], retention_months):
                        # Outside a transaction block: DETACH CONCURRENTLY waits for readers
                        # instead of blocking them.
                        await conn.execute(row["detach_sql"])
                        await conn.execute(row["drop_sql"])
                        dropped.append(row["partition"])
                    for row in await conn.fetch(Q["job_run_partition_detached_leftovers"], retention_months):
                        await conn.execute(row["drop_sql"])
                        dropped.append(row["partition"])
                    if dropped:
                        await self._release_gates(conn)
                    return int(created), dropped
                finally:
                    await conn.fetchval(Q["advisory_unlock"], KEEPER_LOCK)

    @staticmethod
    async def _release_gates(conn: asyncpg.Connection) -> None:
        """Overlap gates held by runs whose partition was just dropped (ADR 0033)."""
        bounds = await conn.fetch(Q["job_run_partition_bounds"])
        if bounds:
            await conn.execute(Q["schedule_release_gates_before"],
                               min(b["lower_bound"] for b in bounds))

    async def partitions(self) -> list[str]:
        with storage_errors("list the partitions"):
            rows = await self._pool.fetch(Q["job_run_partition_list"])
        return [row["partition"] for row in rows]

    async def delete_expired_alert_events(self, retention_days: int, batch: int,
                                          max_batches: int) -> int:
        with storage_errors("delete expired alert events"):
            return await self._delete_in_batches("alert_event_delete_expired", retention_days,
                                                 batch, max_batches)

    async def _delete_in_batches(self, query: str, retention_days: int, batch: int,
                                 max_batches: int) -> int:
        """Run a retention ``query`` until a batch comes back short or ``max_batches`` ran:
        one statement per batch, each its own transaction, so locks stay short."""
        deleted = 0
        for _ in range(max_batches):
            count = rows_affected(await self._pool.execute(Q[query], retention_days, batch))
            deleted += count
            if count < batch:
                break
        return deleted

    async def maintain_audit_log(self, months_ahead: int, retention_days: int, batch: int,
                                 max_batches: int) -> tuple[int, list[str], int]:
        created, dropped = 0, []
        with storage_errors("audit log maintenance"):
            async with self._pool.acquire() as conn:
                if await conn.fetchval(Q["advisory_try_lock"], KEEPER_LOCK):
                    try:
                        created = await conn.fetchval(Q["audit_event_partition_ensure"],
                                                      months_ahead)
                        dropped = await _drop_expired_audit(conn, retention_days)
                    finally:
                        await conn.fetchval(Q["advisory_unlock"], KEEPER_LOCK)
            deleted = 0
            for query in ("audit_event_delete_expired", "schedule_revision_delete_expired"):
                deleted += await self._delete_in_batches(query, retention_days, batch,
                                                         max_batches)
        return int(created), dropped, deleted

    async def audit_partitions(self) -> list[str]:
        with storage_errors("list the audit log's partitions"):
            rows = await self._pool.fetch(Q["audit_event_partition_list"])
        return [row["partition"] for row in rows]

    async def due_backlog(self) -> int:
        with storage_errors("count the due backlog"):
            return int(await self._pool.fetchval(Q["job_run_due_backlog"]))

    async def flow_waiting(self) -> int:
        with storage_errors("count runs held back by flow control"):
            return int(await self._pool.fetchval(Q["flow_control_waiting"]))

    async def earliest_client_certificate_expiry(self) -> datetime | None:
        with storage_errors("find the earliest client certificate expiry"):
            text = await self._pool.fetchval(Q["schedule_earliest_client_certificate_expiry"])
        return tls_expiry_from_text(text)

    async def partition_months_ahead(self) -> int:
        with storage_errors("count the partitions ahead"):
            return int(await self._pool.fetchval(Q["job_run_partition_months_ahead"]))

    async def db_now(self) -> datetime:
        with storage_errors("read the database clock"):
            now: datetime = await self._pool.fetchval(Q["database_now"])
        return now
