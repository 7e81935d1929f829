"""ResolutionWriter over the in-memory stores: batched writes, lost leases, outages."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Collection, Sequence
from datetime import UTC, datetime
from uuid import UUID

from cronwire.adapters.memory import (
    MemoryBreakerStore,
    MemoryClaimSource,
    MemoryDatabase,
    MemoryRunStore,
)
from cronwire.domain.breaker import BreakerPolicy, BreakerStatus, target_key
from cronwire.domain.delivery import DeliveryResult, Outcome
from cronwire.domain.errors import StorageError
from cronwire.domain.model import ClaimedRun, LeaseKey, RunResolution, RunStatus
from cronwire.domain.retry import resolve_attempt
from cronwire.service.executor.lease_keeper import Lease, LeaseKeeper
from cronwire.service.executor.resolution_writer import Finished, ResolutionWriter
from cronwire.service.signals import ExecutorSignals
from tests.support.fakes import CountingMetrics
from tests.support.memory_executor import URL

POLICY = BreakerPolicy(failure_threshold=2, cooldown_seconds=60)


def _result(status: int) -> DeliveryResult:
    now = datetime.now(UTC)
    return DeliveryResult(
        outcome=Outcome.SUCCESS if status < 300 else Outcome.HTTP_ERROR, status_code=status,
        error=None, duration_ms=1, response_excerpt=None, retry_after_seconds=None,
        started_at=now, finished_at=now)


def _finished(run: ClaimedRun, status: int = 200) -> Finished:
    resolution = resolve_attempt(run, _result(status), random.Random(1))
    return Finished(run, Lease(run.id, run.scheduled_for, run.lease_generation, started=True),
                    resolution, target_key(URL), status < 300)


class Rig:
    def __init__(
        self, run_store: Callable[[MemoryDatabase], MemoryRunStore] = MemoryRunStore
    ) -> None:
        self.db = MemoryDatabase()
        self.store = run_store(self.db)
        self.metrics, self.signals = CountingMetrics(), ExecutorSignals()
        keeper = LeaseKeeper(self.store, self.metrics, owner="me", lease_seconds=30,
                             signals=self.signals)
        self.writer = ResolutionWriter(
            self.store, MemoryBreakerStore(self.db), keeper, self.metrics, owner="me",
            breaker_policy=POLICY, lease_seconds=30, signals=self.signals, max_batch=50,
        )

    @property
    def written(self) -> dict[UUID, RunStatus]:
        """What landed: {run id: status written}."""
        return dict(self.signals.settled.items)

    async def claim(self, count: int) -> list[ClaimedRun]:
        schedule = self.db.add_schedule(self.db.add_tenant(), URL)
        self.db.add_due_runs(schedule.id, count)
        return list((await MemoryClaimSource(self.db).claim("me", count, 30)).runs)

    async def write(self, items: list[Finished]) -> None:
        task = asyncio.create_task(self.writer.run())
        for item in items:
            self.writer.submit(item)
        self.writer.close()
        async with asyncio.timeout(10):
            await task


async def test_results_land_in_one_batch_and_feed_the_breaker() -> None:
    rig = Rig(CountingRunStore)
    runs = await rig.claim(3)
    await rig.write([_finished(r, 503) for r in runs])
    assert isinstance(rig.store, CountingRunStore) and rig.store.resolves == 1
    assert set(rig.written.values()) == {RunStatus.RETRYING} and len(rig.written) == 3
    [state] = rig.db.breakers.values()
    assert state.status is BreakerStatus.OPEN and state.failures == 3


async def test_a_result_whose_lease_is_gone_does_not_land() -> None:
    rig = Rig()
    mine, stolen = await rig.claim(2)
    rig.db.runs[(stolen.id, stolen.scheduled_for)].claimed_by = "thief"
    await rig.write([_finished(mine), _finished(stolen)])
    assert rig.written == {mine.id: RunStatus.SUCCEEDED}
    assert rig.signals.lost.items == [stolen.id] and rig.metrics.lost == 1


async def test_an_outage_keeps_the_results_and_writes_them_when_it_ends() -> None:
    rig = Rig(lambda db: OutageRunStore(db, failures=3))
    runs = await rig.claim(2)
    await rig.write([_finished(r) for r in runs])
    assert {r.status for r in rig.db.runs.values()} == {RunStatus.SUCCEEDED}
    assert isinstance(rig.store, OutageRunStore) and rig.store.calls > 3


class CountingRunStore(MemoryRunStore):
    """Counts the resolve statements: one batch, one statement."""

    def __init__(self, db: MemoryDatabase) -> None:
        super().__init__(db)
        self.resolves = 0

    async def resolve(
        self, owner: str, resolutions: Sequence[RunResolution]
    ) -> dict[UUID, RunStatus]:
        self.resolves += 1
        return await super().resolve(owner, resolutions)


class OutageRunStore(MemoryRunStore):
    """The database is away for the first ``failures`` resolves and renewals."""

    def __init__(self, db: MemoryDatabase, failures: int) -> None:
        super().__init__(db)
        self.failures = failures
        self.calls = 0

    def _maybe_fail(self) -> None:
        self.calls += 1
        if self.calls <= self.failures:
            raise StorageError("connection refused")

    async def resolve(
        self, owner: str, resolutions: Sequence[RunResolution]
    ) -> dict[UUID, RunStatus]:
        self._maybe_fail()
        return await super().resolve(owner, resolutions)

    async def renew_leases(
        self, owner: str, runs: Sequence[LeaseKey], lease_seconds: float,
        started: Collection[UUID] = frozenset(),
    ) -> set[UUID]:
        self._maybe_fail()
        return await super().renew_leases(owner, runs, lease_seconds, started)
