"""PostgresKeyedClaims: kafka mode's claims, each one whole statement in job_run.sql.

``claim_keys`` leases the runs whose keys a broker delivered (job_run_claim_keys);
``sweep`` is the SKIP LOCKED safety net for runs no message delivered (job_run_sweep);
``claim_fair`` is the polling claim itself with a grace (job_run_claim);
``report_overflow`` and ``peer_overflowing`` are the replicas' overflow signal
(kafka_overflow.sql, ADR 0063). Only the claims' candidate rows differ: each statement
hands its candidates to the one SQL function ``cronwire_claim_tail`` (migrations
0029 and 0032, ADR 0065), so the lease, the expired-lease reclaim and the exhaustion rule are the same in
every claim.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace

import asyncpg

from cronwire.adapters.postgres.claim_opener import ClaimOpener
from cronwire.adapters.postgres.claim_source import SERVER_CLOCK, claimed_runs
from cronwire.adapters.postgres.driver_errors import storage_errors
from cronwire.adapters.postgres.sql import queries
from cronwire.domain.model import ClaimBatch, RunStatus
from cronwire.ports import RunKey
from cronwire.ports.secrets import SecretBox

log = logging.getLogger(__name__)


class PostgresKeyedClaims:
    def __init__(self, pool: asyncpg.Pool, box: SecretBox) -> None:
        self._pool = pool
        self._opener = ClaimOpener(box)
        named = queries("job_run")
        self._claim_keys = named["job_run_claim_keys"]
        self._sweep = named["job_run_sweep"]
        self._fair = named["job_run_claim"]  # the polling claim itself, with a grace
        self._held = named["job_run_held_keys"]
        overflow = queries("kafka_overflow")
        self._report_overflow = overflow["kafka_overflow_report"]
        self._peer_overflow = overflow["kafka_overflow_peer"]

    async def claim_keys(
        self, owner: str, keys: Sequence[RunKey], lease_seconds: float
    ) -> ClaimBatch:
        unique = list(dict.fromkeys(keys))
        if not unique:
            return ClaimBatch()
        ids = [run_id for run_id, _ in unique]
        times = [at for _, at in unique]
        with storage_errors("claim runs by key"):
            rows = await self._pool.fetch(
                self._claim_keys, owner, len(unique), lease_seconds, ids, times, SERVER_CLOCK
            )
            await self._opener.prepare(rows)
            batch = self._runs(rows)
            # Keys the claim neither leased nor ended: almost always none, except while
            # flow control holds runs back. Those still runnable and due are counted.
            answered = {(row["id"], row["scheduled_for"]) for row in rows}
            left = [key for key in unique if key not in answered]
            if not left:
                return batch
            held: int = await self._pool.fetchval(
                self._held, [run_id for run_id, _ in left], [at for _, at in left])
        return replace(batch, held=held)

    async def claim_fair(
        self, owner: str, limit: int, lease_seconds: float, grace_seconds: float
    ) -> ClaimBatch:
        return await self._claim_due(
            self._fair, "claim runs fairly", owner, limit, lease_seconds, grace_seconds)

    async def sweep(
        self, owner: str, limit: int, lease_seconds: float, grace_seconds: float
    ) -> ClaimBatch:
        return await self._claim_due(
            self._sweep, "sweep overdue runs", owner, limit, lease_seconds, grace_seconds)

    async def report_overflow(self, owner: str, seconds: float) -> None:
        with storage_errors("report overflow"):
            await self._pool.execute(self._report_overflow, owner, seconds)

    async def peer_overflowing(self, owner: str) -> bool:
        with storage_errors("read overflow"):
            return bool(await self._pool.fetchval(self._peer_overflow, owner))

    async def _claim_due(
        self, statement: str, what: str, owner: str, limit: int, lease_seconds: float,
        grace_seconds: float,
    ) -> ClaimBatch:
        """A claim of due runs (no keys): $1 owner, $2 limit, $3 lease, $4 grace, $5 now."""
        if limit <= 0:
            return ClaimBatch()
        with storage_errors(what):
            rows = await self._pool.fetch(
                statement, owner, limit, lease_seconds, grace_seconds, SERVER_CLOCK)
            await self._opener.prepare(rows)
        return self._runs(rows)

    def _runs(self, rows: Sequence[asyncpg.Record]) -> ClaimBatch:
        batch = claimed_runs(rows, self._opener)
        if any(status is not RunStatus.SKIPPED for status in batch.ended):
            log.warning(
                "ended %d runs instead of leasing them: expired leases whose final attempt's "
                "owner vanished, or runs superseded under overlap_policy cancel_other",
                len(batch.ended),
            )
        return batch
