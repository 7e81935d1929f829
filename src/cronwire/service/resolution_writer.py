"""Writes finished attempts in batches: one resolve statement for many runs.

Results gather in a buffer while the previous write is on the wire, so the batch size
follows the load by itself. Each row of a batch still carries the lease predicate (rule
3). If a batch fails as a whole, each run is retried alone so one poison row cannot take
its neighbours down, and a run whose own write fails too is driven to ``failed`` by the
minimal write: a run left ``running`` would be reaped, re-claimed and redelivered for
ever without a terminal state ever reaching the breaker.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from uuid import UUID

from cronwire.domain.breaker import BreakerPolicy
from cronwire.domain.model import ClaimedRun, RunResolution, RunStatus
from cronwire.errors import StorageError
from cronwire.ports import BreakerStore, RunStore
from cronwire.service.lease_keeper import Lease

log = logging.getLogger(__name__)


@dataclass(slots=True)  # not frozen: one per delivery, and frozen __init__ costs more
class Finished:
    """One attempt's result, ready to be written."""

    run: ClaimedRun
    lease: Lease
    resolution: RunResolution
    breaker_key: str
    healthy: bool | None  # breaker signal; None: the outcome says nothing about the target


# (batch, {run id: status written}) - a run missing from the dict did not land.
Written = Callable[[Sequence[Finished], dict[UUID, RunStatus]], None]


class ResolutionWriter:
    def __init__(
        self,
        run_store: RunStore,
        breaker_store: BreakerStore,
        *,
        owner: str,
        breaker_policy: BreakerPolicy,
        on_written: Written,
        max_batch: int = 500,
        linger_seconds: float = 0.002,
    ) -> None:
        self._runs = run_store
        self._breakers = breaker_store
        self._owner = owner
        self._policy = breaker_policy
        self._on_written = on_written
        self._max_batch = max_batch
        self._linger = linger_seconds
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
        try:
            ids = await self._runs.resolve(self._owner, [f.resolution for f in batch])
            landed = {f.run.id: f.resolution.status for f in batch if f.run.id in ids}
        except StorageError:
            log.warning("batched resolve of %d runs failed; writing one by one", len(batch),
                        exc_info=True)
            landed = await self._write_alone(batch)
        self._on_written(batch, landed)
        await self._feed_breakers(
            [f for f in batch if landed.get(f.run.id) is f.resolution.status]
        )

    async def _write_alone(self, batch: list[Finished]) -> dict[UUID, RunStatus]:
        landed: dict[UUID, RunStatus] = {}
        for item in batch:
            try:
                if await self._runs.resolve(self._owner, [item.resolution]):
                    landed[item.run.id] = item.resolution.status
                continue
            except StorageError as exc:
                error = f"ResolveFailed: {exc}"
            try:
                if await self._runs.fail_minimal(
                    self._owner, item.run.id, item.run.scheduled_for, error
                ):
                    landed[item.run.id] = RunStatus.FAILED
            except StorageError:
                log.error("minimal failure write for run %s failed", item.run.id, exc_info=True)
        return landed

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
