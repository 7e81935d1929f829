"""Kafka mode's two claims in flight (ADR 0063): the consumed keys are taken, claimed and
then acknowledged or rewound as a whole, so while one claim is between taking keys and
settling them, the other takes none. It does what needs no keys: the fair claim while a
partition is backlogged, a sweep when one is due, or nothing."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Sequence
from typing import Any

from cronwire.adapters.memory import (
    MemoryClaimSource,
    MemoryClock,
    MemoryDatabase,
    MemoryHints,
    MemoryKeyedClaims,
)
from cronwire.adapters.memory.database import MemoryRun
from cronwire.domain.model import ClaimBatch
from cronwire.ports import RunKey
from cronwire.service.executor.hybrid_claims import HybridClaimSource

URL = "http://127.0.0.1:9/hook"


class _HeldKeys(MemoryKeyedClaims):
    """A claim by keys that waits in the database until ``release`` is set."""

    def __init__(self, db: MemoryDatabase) -> None:
        super().__init__(db)
        self.release = asyncio.Event()
        self.entered = asyncio.Event()

    async def claim_keys(self, owner: str, keys: Sequence[RunKey], lease_seconds: float,
                         ) -> ClaimBatch:
        self.entered.set()
        await self.release.wait()
        return await super().claim_keys(owner, keys, lease_seconds)


async def _beside(claim: Coroutine[Any, Any, ClaimBatch]) -> ClaimBatch:
    """The second claim must not wait for the first's keys (a claim of keys would block)."""
    return await asyncio.wait_for(claim, 5)


def _rig(*, buffer_limit: int | None, sweep_seconds: float = 3600) -> tuple[
        MemoryDatabase, MemoryHints, _HeldKeys, HybridClaimSource, list[MemoryRun]]:
    """Four fresh runs whose keys are delivered (the fair claim leaves them to their keys)
    and four runs 10 s overdue whose keys are not."""
    db = MemoryDatabase(clock=MemoryClock(frozen=True))
    schedule = db.add_schedule(db.add_tenant(), URL).id
    runs = db.add_due_runs(schedule, 4, due_seconds_ago=0.5)
    runs += db.add_due_runs(schedule, 4, first=10, due_seconds_ago=10)
    hints, keyed = MemoryHints(buffer_limit=buffer_limit), _HeldKeys(db)
    source = HybridClaimSource(hints, keyed, MemoryClaimSource(db), db.clock,
                               grace_seconds=30, sweep_seconds=sweep_seconds)
    hints.deliver([run.key for run in runs[:4]])
    return db, hints, keyed, source, runs


async def test_the_kafka_source_asks_for_two_claims_in_flight() -> None:
    assert HybridClaimSource.claims_at_once == 2


async def test_a_claim_beside_a_claim_of_keys_takes_no_keys() -> None:
    # Before: the second claim took the next keys, and whichever claim settled first
    # acknowledged the other's keys too, before their runs were leased.
    _, hints, keyed, source, runs = _rig(buffer_limit=None)
    first = asyncio.create_task(source.claim("a", 2, 30))
    await keyed.entered.wait()
    beside = await _beside(source.claim("a", 2, 30))
    assert beside.runs == () and hints.buffered == 2 and hints.acknowledged == []
    keyed.release.set()
    assert {r.id for r in (await first).runs} == {run.id for run in runs[:2]}
    assert hints.acknowledged == [run.key for run in runs[:2]]
    after = await source.claim("a", 2, 30)  # the keys' step is free again
    assert {r.id for r in after.runs} == {run.id for run in runs[2:4]}


async def test_beside_a_backlogged_claim_the_other_claims_fairly() -> None:
    _, hints, keyed, source, runs = _rig(buffer_limit=2)
    assert hints.backlogged
    first = asyncio.create_task(source.claim("a", 2, 30))  # one key, one fair
    await keyed.entered.wait()
    assert hints.backlogged  # three keys still wait
    beside = await _beside(source.claim("a", 3, 30))
    assert len(beside.runs) == 3 and beside.sources == (("sweeper", 3),)
    assert hints.buffered == 3 and hints.acknowledged == []
    keyed.release.set()
    both = await first
    assert runs[0].id in {r.id for r in both.runs}  # its key's run
    claimed = [r.id for r in both.runs + beside.runs]
    assert len(claimed) == len(set(claimed)) == 5  # no run leased twice
    assert set(claimed) - {runs[0].id} <= {run.id for run in runs[4:]}  # fair: the overdue
    assert hints.acknowledged == [runs[0].key]


async def test_beside_a_claim_of_keys_a_due_sweep_goes_ahead() -> None:
    db, hints, keyed, source, runs = _rig(buffer_limit=None, sweep_seconds=1)
    first = asyncio.create_task(source.claim("a", 2, 30))
    await keyed.entered.wait()
    db.clock.advance(30)  # past the grace, and the sweep is due
    swept = await _beside(source.claim("a", 3, 30))
    assert len(swept.runs) == 3 and swept.sources == (("sweeper", 3),)
    assert hints.buffered == 2  # no key taken beside
    keyed.release.set()
    keyed_ids = {r.id for r in (await first).runs}
    assert keyed_ids.isdisjoint(r.id for r in swept.runs)
    assert hints.acknowledged == [run.key for run in runs[:2]]
