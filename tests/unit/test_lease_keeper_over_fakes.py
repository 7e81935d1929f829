"""LeaseKeeper over the in-memory run store: one renewal for every lease, started
requests recorded, lost leases cancelled, failed renewals retried soon."""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Sequence
from uuid import UUID

from cronwire.adapters.memory import MemoryClaimSource, MemoryDatabase, MemoryRunStore
from cronwire.domain.errors import StorageError
from cronwire.domain.model import LeaseKey, OverlapPolicy
from cronwire.service.executor.lease_keeper import Lease, LeaseKeeper
from cronwire.service.signals import ExecutorSignals
from tests.support.fakes import CountingMetrics
from tests.support.memory_executor import URL


async def _leases(db: MemoryDatabase, count: int) -> list[Lease]:
    schedule = db.add_schedule(db.add_tenant(), URL)
    db.add_due_runs(schedule.id, count)
    runs = (await MemoryClaimSource(db).claim("me", count, 3)).runs
    return [Lease(r.id, r.scheduled_for, r.lease_generation) for r in runs]


async def test_a_renewal_extends_every_lease_and_records_started_requests() -> None:
    db = MemoryDatabase()
    first, second = await _leases(db, 2)
    first.started = True
    metrics = CountingMetrics()
    keeper = LeaseKeeper(MemoryRunStore(db), metrics, owner="me", lease_seconds=60)
    keeper.hold(first)
    keeper.hold(second)
    await keeper.renew()
    rows = {r.id: r for r in db.runs.values()}
    assert all((r.claim_expires_at - db.now()).total_seconds() > 50 for r in rows.values())  # type: ignore[operator]
    assert (rows[first.run_id].attempt_started, rows[second.run_id].attempt_started) == (
        True, False)
    assert metrics.lost == 0  # no lease reported lost


async def test_a_lost_lease_in_flight_is_cancelled_and_reported() -> None:
    db = MemoryDatabase()
    [lease] = await _leases(db, 1)
    lease.task = asyncio.create_task(asyncio.Event().wait())
    metrics, signals = CountingMetrics(), ExecutorSignals()
    keeper = LeaseKeeper(MemoryRunStore(db), metrics, owner="me", lease_seconds=60,
                         signals=signals)
    keeper.hold(lease)
    [run] = db.runs.values()
    run.claimed_by = "someone-else"
    await keeper.renew()
    assert signals.lost.items == [lease.run_id] and metrics.lost == 1
    assert lease.lost and len(keeper) == 0
    await asyncio.gather(lease.task, return_exceptions=True)
    assert lease.task.cancelled()


async def test_a_failed_renewal_is_retried_before_the_next_interval() -> None:
    db = MemoryDatabase()
    [lease] = await _leases(db, 1)
    store = FlakyRunStore(db, failures=2)
    signals, metrics = ExecutorSignals(), CountingMetrics()
    keeper = LeaseKeeper(store, metrics, owner="me", lease_seconds=0.6, signals=signals)
    keeper.hold(lease)
    task = asyncio.create_task(keeper.run())
    try:
        # Interval 0.2 s; two failures retried after 0.2 and 0.2 (capped) s, then it lands.
        await signals.renewals.wait_count(1, within=5)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert store.calls >= 3 and signals.renewals.items[0] == 1
    assert metrics.lost == 0  # a failed renewal proves no lease lost


class FlakyRunStore(MemoryRunStore):
    def __init__(self, db: MemoryDatabase, failures: int) -> None:
        super().__init__(db)
        self.failures = failures
        self.calls = 0

    async def renew_leases(
        self, owner: str, runs: Sequence[LeaseKey], lease_seconds: float,
        started: Collection[UUID] = frozenset(),
    ) -> set[UUID]:
        self.calls += 1
        if self.calls <= self.failures:
            raise StorageError("connection refused")
        return await super().renew_leases(owner, runs, lease_seconds, started)



async def test_a_superseded_cancel_other_request_is_aborted_and_its_lease_kept() -> None:
    db = MemoryDatabase()
    superseded, current, plain = await _leases(db, 3)
    runs = {r.id: r for r in db.runs.values()}
    for lease in (superseded, current):
        runs[lease.run_id].overlap_policy = OverlapPolicy.CANCEL_OTHER
        lease.cancel_other = True
    schedule = db.schedules[runs[current.run_id].schedule_id]
    schedule.overlap_run = (current.run_id, current.scheduled_for)  # the newer one started
    for lease in (superseded, current, plain):
        lease.task = asyncio.create_task(asyncio.Event().wait())
        lease.started = True
    metrics, signals = CountingMetrics(), ExecutorSignals()
    keeper = LeaseKeeper(MemoryRunStore(db), metrics, owner="me", lease_seconds=60,
                         signals=signals)
    for lease in (superseded, current, plain):
        keeper.hold(lease)
    await keeper.abort_superseded()
    await asyncio.sleep(0)
    assert superseded.superseded and superseded.task.cancelled()
    assert not superseded.lost and keeper.get(superseded.run_id) is superseded  # to write
    assert metrics.lost == 0 and signals.lost.items == []
    for lease in (current, plain):  # the gate's holder, and a run under 'allow'
        assert lease.task is not None and not lease.task.done() and not lease.superseded
        lease.task.cancel()
    assert keeper.superseded_poll <= 0.5


async def test_no_superseded_check_while_no_cancel_other_request_is_in_flight() -> None:
    db = MemoryDatabase()
    [lease] = await _leases(db, 1)
    store = CountingSupersededStore(db)
    keeper = LeaseKeeper(store, CountingMetrics(), owner="me", lease_seconds=60)
    keeper.hold(lease)
    await keeper.abort_superseded()
    assert store.checks == 0  # 'allow' pays nothing


class CountingSupersededStore(MemoryRunStore):
    def __init__(self, db: MemoryDatabase) -> None:
        super().__init__(db)
        self.checks = 0

    async def superseded(self, owner: str, runs: Sequence[LeaseKey]) -> set[UUID]:
        self.checks += 1
        return await super().superseded(owner, runs)
