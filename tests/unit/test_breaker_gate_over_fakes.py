"""BreakerGate over the in-memory breaker store: closed delivers, open defers to the end
of its cool-down, a cooled breaker lets exactly one probe through."""

from __future__ import annotations

from datetime import timedelta

from cronwire.adapters.memory import MemoryBreakerStore, MemoryClaimSource, MemoryDatabase
from cronwire.domain.breaker import BreakerPolicy, BreakerState, BreakerStatus, target_key
from cronwire.domain.model import ClaimedRun
from cronwire.service.executor.breaker_gate import BreakerGate
from tests.support.memory_executor import URL

POLICY = BreakerPolicy(failure_threshold=3, cooldown_seconds=60, probe_wait_seconds=5)


async def _claimed(db: MemoryDatabase, count: int) -> list[ClaimedRun]:
    schedule = db.add_schedule(db.add_tenant(), URL)
    db.add_due_runs(schedule.id, count)
    return list((await MemoryClaimSource(db).claim("me", count, 30)).runs)


def _gate(db: MemoryDatabase) -> BreakerGate:
    return BreakerGate(MemoryBreakerStore(db), owner="me", policy=POLICY, probe_seconds=30)


async def test_a_closed_breaker_lets_every_run_through() -> None:
    db = MemoryDatabase()
    runs = await _claimed(db, 3)
    admitted = await _gate(db).sort(runs)
    assert [run for run, _ in admitted.deliver] == runs and not admitted.defer


async def test_an_open_breaker_defers_to_the_end_of_its_cool_down() -> None:
    db = MemoryDatabase()
    runs = await _claimed(db, 2)
    until = db.now() + timedelta(seconds=40)
    db.breakers[(runs[0].tenant_id, target_key(URL))] = BreakerState(
        BreakerStatus.OPEN, failures=3, opened_until=until)
    admitted = await _gate(db).sort(runs)
    assert admitted.deliver == [] and dict(admitted.defer) == {until: runs}


async def test_a_cooled_breaker_sends_one_probe_and_holds_the_rest() -> None:
    db = MemoryDatabase()
    runs = await _claimed(db, 3)
    key = (runs[0].tenant_id, target_key(URL))
    db.breakers[key] = BreakerState(BreakerStatus.OPEN, failures=3,
                                    opened_until=db.now() - timedelta(seconds=1))
    admitted = await _gate(db).sort(runs)
    assert [run for run, _ in admitted.deliver] == runs[:1]
    [(until, waiting)] = admitted.defer.items()
    assert waiting == runs[1:] and until > db.now()
    assert db.breakers[key].status is BreakerStatus.HALF_OPEN
    assert db.breakers[key].probe_by == "me"
