"""The seed ADR's three lease rules as fast tests over the in-memory stores (the same
rules run against real Postgres in tests/integration/test_executor*.py)."""

from __future__ import annotations

from collections.abc import Sequence
from uuid import UUID

from cronwire.adapters.memory import MemoryDatabase, MemoryRunStore
from cronwire.domain.errors import StorageError
from cronwire.domain.model import RunResolution, RunStatus
from tests.support.memory_executor import OWNER, Rig


async def test_rule_1_claims_no_more_than_the_idle_workers() -> None:
    rig = Rig()
    rig.seed(10)
    rig.deliverer.hold.clear()
    async with rig.running(rig.executor(workers=3, batch=8, lease_seconds=0.3)):
        await rig.signals.started.wait_count(3, within=10)
        # Two renewal rounds (0.1 s apart): the claim loop polled many times meanwhile.
        await rig.signals.renewals.wait_count(2, within=10)
        assert rig.statuses() == {"running": 3, "pending": 7}
        assert rig.deliverer.in_flight == 3
        rig.deliverer.hold.set()
        await rig.signals.settled.wait_count(10, within=10)
    assert rig.statuses() == {"succeeded": 10}


async def test_rule_2_a_lease_found_gone_cancels_the_request_and_drops_its_result() -> None:
    rig = Rig()
    rig.seed(1)
    rig.deliverer.hold.clear()
    executor = rig.executor(lease_seconds=0.3)  # renewed every 0.1 s
    async with rig.running(executor):
        await rig.signals.started.wait_count(1, within=10)
        [run] = rig.db.runs.values()
        run.claimed_by, run.lease_generation = "another-replica", run.lease_generation + 1
        await rig.signals.abandoned.wait_count(1, within=10)
        assert rig.signals.lost.items == [run.id]
        rig.deliverer.hold.set()
    assert (run.status, run.claimed_by) == (RunStatus.RUNNING, "another-replica")
    assert rig.db.attempts == {} and rig.signals.settled.items == []
    assert rig.metrics.lost >= 1


async def test_rule_3_a_write_after_the_lease_moved_on_lands_nothing() -> None:
    rig = Rig()
    rig.seed(1)
    rig.deliverer.hold.clear()
    async with rig.running(rig.executor(lease_seconds=60)):  # no renewal in this test
        await rig.signals.started.wait_count(1, within=10)
        [run] = rig.db.runs.values()
        run.lease_generation += 1  # a twin under the same owner re-claimed it
        rig.deliverer.hold.set()
        await rig.signals.lost.wait_count(1, within=10)
    assert run.status is RunStatus.RUNNING and run.claimed_by == OWNER
    assert rig.db.attempts == {}


async def test_rule_3_a_rejected_write_is_followed_by_the_minimal_failure() -> None:
    rig = Rig()
    rig.seed(2)
    poison = min(r.id for r in rig.db.runs.values())
    async with rig.running(rig.executor(RejectingRunStore(rig.db, poison))):
        await rig.signals.settled.wait_count(2, within=10)
    by_id = {r.id: r for r in rig.db.runs.values()}
    assert by_id[poison].status is RunStatus.FAILED
    assert (by_id[poison].last_error or "").startswith("ResolveFailed")
    assert {r.status for i, r in by_id.items() if i != poison} == {RunStatus.SUCCEEDED}


class RejectingRunStore(MemoryRunStore):
    """Refuses every resolve that includes ``poison`` (a row the database rejects)."""

    def __init__(self, db: MemoryDatabase, poison: UUID) -> None:
        super().__init__(db)
        self._poison = poison

    async def resolve(
        self, owner: str, resolutions: Sequence[RunResolution]
    ) -> dict[UUID, RunStatus]:
        if any(r.run_id == self._poison for r in resolutions):
            raise StorageError("value too long")
        return await super().resolve(owner, resolutions)
