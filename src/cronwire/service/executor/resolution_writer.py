"""Writes finished attempts in batches: one resolve statement for many runs.

Results gather in a buffer while the previous write is on the wire, so the batch size
follows the load by itself. Each row of a batch still carries the lease predicate (rule
3).

If a batch fails as a whole, one renewal of its leases tells why:

- the database does not answer (an outage, a restart): the results are kept and the
  write retried with backoff for as long as it takes. The renewal keeps the leases alive
  meanwhile (and the lease keeper keeps trying too), so an outage shorter than the lease
  delivers nothing twice; dropping the results would let the leases expire and every one
  of those runs go out again;
- the database answers: leases it no longer finds ours are lost (unless our own write
  already ended them, its reply lost with the connection), and the rest are written one
  by one so one poison row cannot take its neighbours down. A run whose own write is
  rejected is driven to ``failed`` by the minimal write: a run left ``running`` would be
  reaped, re-claimed and redelivered for ever without a terminal state ever reaching the
  breaker.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from uuid import UUID

from cronwire.domain.breaker import BreakerPolicy
from cronwire.domain.errors import StorageError
from cronwire.domain.model import ClaimedRun, RunResolution, RunStatus
from cronwire.ports import BreakerStore, Metrics, RunStore, Tracer
from cronwire.ports.observability import TRACING_OFF
from cronwire.service.executor.lease_keeper import Lease, LeaseKeeper
from cronwire.service.signals import ExecutorSignals, quiet_signals

log = logging.getLogger(__name__)
RETRY_FIRST_SECONDS = 0.1  # backoff of a write retried through an outage, doubling...
RETRY_MAX_SECONDS = 1.0  # ...up to this: a write lands within a second of the database's return
MAX_REJECTED_ROUNDS = 5  # a run whose every write the answering database rejects is given up


@dataclass(slots=True)  # not frozen: one per delivery, and frozen __init__ costs more
class Finished:
    """One attempt's result, ready to be written."""

    run: ClaimedRun
    lease: Lease
    resolution: RunResolution
    breaker_key: str
    healthy: bool | None  # breaker signal; None: the outcome says nothing about the target


class ResolutionWriter:
    def __init__(
        self,
        run_store: RunStore,
        breaker_store: BreakerStore,
        keeper: LeaseKeeper,
        metrics: Metrics,
        *,
        owner: str,
        breaker_policy: BreakerPolicy,
        lease_seconds: float,
        signals: ExecutorSignals | None = None,
        max_batch: int = 500,
        linger_seconds: float = 0.002,
        tracer: Tracer = TRACING_OFF,
    ) -> None:
        self._runs = run_store
        self._breakers = breaker_store
        self._keeper = keeper
        self._metrics = metrics
        self._owner = owner
        self._policy = breaker_policy
        self._signals = signals or quiet_signals()
        self._lease_seconds = lease_seconds
        self._max_batch = max_batch
        self._linger = linger_seconds
        self._tracer = tracer
        self._buffer: list[Finished] = []
        self._wake = asyncio.Event()
        self._closing = False

    @property
    def backlog(self) -> int:
        """Results waiting to be written."""
        return len(self._buffer)

    def submit(self, item: Finished) -> None:
        self._buffer.append(item)
        self._wake.set()

    def close(self) -> None:
        """Ask :meth:`run` to write what is buffered and return."""
        self._closing = True
        self._wake.set()

    async def run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            if not self._closing and 0 < len(self._buffer) < self._max_batch:
                await asyncio.sleep(self._linger)  # let a small batch fill a little
            while self._buffer:
                batch = self._buffer[: self._max_batch]
                del self._buffer[: self._max_batch]
                await self._write(batch)
            if self._closing:
                return

    async def _write(self, batch: list[Finished]) -> None:
        started = time.time_ns() if self._tracer.enabled else 0
        landed, resolved = await self._land(batch)
        if self._tracer.enabled:
            self._tracer.result_write(started, time.time_ns(),
                                      [(f.run, landed.get(f.run.id)) for f in batch])
        self._settle(batch, landed)
        await self._feed_breakers([f for f in batch if f.run.id in resolved])

    def _settle(self, batch: Sequence[Finished], landed: dict[UUID, RunStatus]) -> None:
        """Let go of the batch's leases: a run whose write did not land lost its lease
        (counted by the keeper); the others are settled, and the terminal ones counted in
        scheduler_runs_total, one counter update per outcome per batch."""
        finished: Counter[RunStatus] = Counter()
        for item in batch:
            status = landed.get(item.run.id)
            if status is None:
                self._keeper.lose(item.lease)
                continue
            self._keeper.drop(item.lease)
            if status.terminal:
                finished[status] += 1
            self._signals.settled.add([(item.run.id, status)])
        for status, count in finished.items():
            self._metrics.run_finished(str(status), count)

    async def _land(self, batch: list[Finished]) -> tuple[dict[UUID, RunStatus], set[UUID]]:
        """Write ``batch`` until every run landed or its lease is known lost. Returns
        ({run id: status written}, ids whose full resolution landed, not the minimal write)."""
        landed: dict[UUID, RunStatus] = {}
        resolved: set[UUID] = set()
        pending, failures, rejected = batch, 0, 0
        while pending:
            try:
                written = await self._runs.resolve(self._owner, [f.resolution for f in pending])
            except StorageError:
                failures += 1
                log.warning("batched resolve of %d runs failed (%d in a row)", len(pending),
                            failures, exc_info=failures == 1)
            else:
                landed.update(written)
                resolved.update(written)
                return landed, resolved
            try:
                pending = await self._still_ours(pending, landed)
            except StorageError:  # the database is away: keep the results, try again
                await asyncio.sleep(min(RETRY_MAX_SECONDS, RETRY_FIRST_SECONDS * 2 ** min(failures, 8)))
                continue
            pending = await self._write_alone(pending, landed, resolved)
            rejected += 1
            if pending and rejected >= MAX_REJECTED_ROUNDS:
                log.error("giving up on the results of %d runs: every write was rejected",
                          len(pending))
                break
            if pending:
                await asyncio.sleep(RETRY_FIRST_SECONDS)
        return landed, resolved

    async def _still_ours(
        self, pending: list[Finished], landed: dict[UUID, RunStatus]
    ) -> list[Finished]:
        """Renew the leases of ``pending`` (raises StorageError while the database is
        away); a lease not renewed is lost, unless our own write ended it already."""
        keys = [f.lease.key for f in pending]
        ours = await self._runs.renew_leases(
            self._owner, keys, self._lease_seconds, {f.run.id for f in pending}
        )
        gone = [f.lease.key for f in pending if f.run.id not in ours]
        if gone:
            landed.update(await self._runs.ended_by_lease(self._owner, gone))
        return [f for f in pending if f.run.id in ours]

    async def _write_alone(
        self, pending: list[Finished], landed: dict[UUID, RunStatus], resolved: set[UUID]
    ) -> list[Finished]:
        """One by one; returns the runs neither write could land (the database went away
        again, or rejects even the minimal write) to be tried again."""
        left: list[Finished] = []
        for item in pending:
            try:
                written = await self._runs.resolve(self._owner, [item.resolution])
                landed.update(written)
                resolved.update(written)
                continue
            except StorageError as exc:
                error = f"ResolveFailed: {exc}"
            try:
                if await self._runs.fail_minimal(
                    self._owner, item.run.id, item.run.scheduled_for, error, item.lease.generation
                ):
                    landed[item.run.id] = RunStatus.FAILED
            except StorageError:
                log.warning("minimal failure write for run %s failed", item.run.id, exc_info=True)
                left.append(item)
        return left

    async def _feed_breakers(self, written: list[Finished]) -> None:
        outcomes = [
            (f.run.tenant_id, f.breaker_key, f.healthy) for f in written if f.healthy is not None
        ]  # type: list[tuple[UUID, str, bool]]
        if not outcomes:
            return
        try:
            await self._breakers.record(outcomes, self._policy)
        except StorageError:
            log.warning("feeding %d outcomes to the breakers failed", len(outcomes), exc_info=True)
