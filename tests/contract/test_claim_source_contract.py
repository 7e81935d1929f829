"""The ClaimSource contract, against every source: the polling one on real Postgres,
kafka mode's hybrid (real Postgres, real broker) and the in-memory fake. Kafka mode's
claims arrive through published keys, so each claim here first lets the outbox publish and
the consumer receive (``ready``)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass

import pytest

from cronwire.domain.model import ClaimedRun, RunStatus
from cronwire.ports import ClaimSource
from tests.support.brokers import KAFKA_BROKERS, bootstrap_of, broker_params
from tests.support.kafka import kafka_mode
from tests.support.worlds import URL, MemoryWorld, PostgresWorld, World


@dataclass
class Contract:
    world: World
    ready: Callable[[], Awaitable[object]]  # make due runs claimable through this source
    labels: frozenset[str]

    @property
    def source(self) -> ClaimSource:
        return self.world.claims

    async def claim(self, owner: str, limit: int, lease: float = 30) -> Sequence[ClaimedRun]:
        await self.ready()
        return (await self.source.claim(owner, limit, lease)).runs


async def _nothing() -> None:
    return None


@pytest.fixture(params=["postgres", *(f"kafka-{k}" for k in broker_params(*KAFKA_BROKERS)),
                        "memory"])
def store(request: pytest.FixtureRequest) -> tuple[str, object, str | None]:
    """(name, what the contract is built on, broker) - resolved outside the event loop.
    Kafka mode runs on every broker kind (tansu, Apache Kafka)."""
    if request.param == "memory":
        return "memory", None, None
    pool = request.getfixturevalue("db_pool")
    if request.param == "postgres":
        return "postgres", pool, None
    return "kafka", pool, bootstrap_of(request, request.param.removeprefix("kafka-"))


@pytest.fixture
async def contract(store: tuple[str, object, str | None]) -> AsyncIterator[Contract]:
    name, pool, bootstrap = store
    if name == "memory":
        yield Contract(MemoryWorld(), _nothing, frozenset({"memory"}))
        return
    if name == "postgres":
        yield Contract(PostgresWorld(pool), _nothing, frozenset({"postgres"}))  # type: ignore[arg-type]
        return
    assert bootstrap is not None
    # Sweep on every claim: expired leases are the sweeper's in kafka mode.
    async with kafka_mode(pool, bootstrap, sweep_seconds=0.0) as mode:  # type: ignore[arg-type]
        world = PostgresWorld(pool, claims=mode.source)  # type: ignore[arg-type]
        yield Contract(world, mode.settle, frozenset({"kafka", "sweeper"}))


async def test_claim_takes_a_lease_on_due_runs_only(contract: Contract) -> None:
    world = contract.world
    schedule = await world.seed(5)
    await world.seed(3, first=100, due_seconds_ago=-60, schedule=schedule)
    runs = await contract.claim("replica-a", 10)
    assert len(runs) == 5 and {r.attempt for r in runs} == {1}
    assert contract.source.name in contract.labels
    assert all(r.target.url == URL and r.signing_secrets == (schedule.signing_secret,) for r in runs)
    rows = [await world.row(r.id) for r in runs]
    assert {(r.status, r.claimed_by, r.attempt_count) for r in rows} == {
        ("running", "replica-a", 1)}
    assert all(r.lease_left is not None and 28 < r.lease_left <= 30 for r in rows)
    assert await contract.claim("replica-b", 10) == ()


async def test_claim_never_takes_more_than_the_limit(contract: Contract) -> None:
    await contract.world.seed(10)
    assert len(await contract.claim("replica-a", 3)) == 3
    assert await contract.world.count("running") == 3


async def test_concurrent_claims_never_share_a_run(contract: Contract) -> None:
    await contract.world.seed(100)
    await contract.ready()
    batches = await asyncio.gather(
        *(contract.source.claim(f"r{i}", 30, 30) for i in range(4)))
    ids = [run.id for batch in batches for run in batch.runs]
    assert len(ids) == len(set(ids))
    assert await contract.world.count("running") == len(ids)


async def test_a_live_lease_is_not_reclaimed_but_an_expired_one_is(contract: Contract) -> None:
    world = contract.world
    await world.seed(2)
    first = await contract.claim("replica-a", 10)
    assert len(first) == 2
    assert await contract.claim("replica-b", 10) == ()
    expired = first[0]
    await world.expire(expired.id)
    again = await contract.claim("replica-b", 10)
    assert [r.id for r in again] == [expired.id]
    assert again[0].attempt == 1  # the vanished owner's request never started: not used
    assert again[0].lease_generation == expired.lease_generation + 1
    assert (await world.row(expired.id)).claimed_by == "replica-b"


async def test_an_expired_lease_on_the_final_attempt_fails_instead_of_redelivering(
    contract: Contract,
) -> None:
    world = contract.world
    await world.seed(
        1, retry={"max_attempts": 2, "initial_backoff_seconds": 1, "max_backoff_seconds": 1})
    await world.set_all(status="running", attempt_count=2, claimed_by="gone",
                        attempt_started=True, expired=True)
    assert await contract.claim("replica-b", 10) == ()
    [row] = await world.rows()
    assert row.status == RunStatus.FAILED and row.attempt_count == 2
    assert row.last_error is not None and row.last_error.startswith("LeaseExpired")


async def test_an_expired_final_attempt_that_never_started_is_leased_again_as_itself(
    contract: Contract,
) -> None:
    """Only attempts whose request left count towards exhaustion (attempt_started)."""
    world = contract.world
    await world.seed(
        1, retry={"max_attempts": 2, "initial_backoff_seconds": 1, "max_backoff_seconds": 1})
    await world.set_all(status="running", attempt_count=2, claimed_by="gone",
                        attempt_started=False, expired=True)
    [run] = await contract.claim("replica-b", 10)
    assert run.attempt == 2
    row = await world.row(run.id)
    assert (row.status, row.claimed_by, row.attempt_count) == ("running", "replica-b", 2)


async def test_both_secrets_sign_while_a_rotation_is_in_progress(contract: Contract) -> None:
    schedule = await contract.world.seed(1, previous_secret="whsec_" + "A" * 32)
    [run] = await contract.claim("replica-a", 1)
    assert run.signing_secrets == (schedule.signing_secret, "whsec_" + "A" * 32)


async def test_an_idle_wait_for_work_returns_within_its_bound(contract: Contract) -> None:
    async with asyncio.timeout(5):
        await contract.source.wait_for_work(0.2)
