"""The KeyedClaimStore contract (kafka mode's claims), against PostgresKeyedClaims and the
in-memory fake: a key is a hint, the sweep waits out its grace, leases as the polling
claim takes them."""

from __future__ import annotations

import pytest

from cronwire.domain.model import RunStatus
from tests.support.worlds import STORES, World, world_for


@pytest.fixture(params=STORES)
def world(request: pytest.FixtureRequest) -> World:
    return world_for(request)


async def test_only_the_runnable_keys_are_claimed(world: World) -> None:
    schedule = await world.seed(2)
    await world.seed(1, first=100, due_seconds_ago=-60, schedule=schedule)  # not due
    polled = (await world.claims.claim("probe", 10, 30)).runs
    assert len(polled) == 2
    await world.runs.release("probe", [(r.id, r.scheduled_for, r.lease_generation)
                                       for r in polled[:1]])
    keys = [(r.id, r.scheduled_for) for r in polled]  # one free again, one leased
    batch = (await world.keyed.claim_keys("a", keys, 30)).runs
    assert [r.id for r in batch] == [polled[0].id] and batch[0].attempt == 1
    row = await world.row(polled[0].id)
    assert (row.status, row.claimed_by) == ("running", "a")
    assert row.lease_left is not None and 28 < row.lease_left <= 30


async def test_a_key_names_one_run_by_its_id_and_its_occurrence(world: World) -> None:
    await world.seed(2)
    polled = (await world.claims.claim("probe", 10, 30)).runs
    await world.runs.release("probe", [(r.id, r.scheduled_for, r.lease_generation)
                                       for r in polled])
    a, b = polled
    assert a.scheduled_for != b.scheduled_for
    crossed = [(a.id, b.scheduled_for), (b.id, a.scheduled_for)]
    assert not (await world.keyed.claim_keys("x", crossed, 30)).runs
    assert await world.count("running") == 0
    batch = (await world.keyed.claim_keys("x", [(a.id, a.scheduled_for)] * 2, 30)).runs
    assert [r.id for r in batch] == [a.id]  # a key delivered twice leases its run once


async def test_an_expired_lease_is_claimable_by_its_key(world: World) -> None:
    await world.seed(1)
    [run] = (await world.claims.claim("gone", 1, 30)).runs
    await world.expire(run.id)
    [again] = (await world.keyed.claim_keys("a", [(run.id, run.scheduled_for)], 30)).runs
    assert again.lease_generation == run.lease_generation + 1 and again.attempt == 1


async def test_the_sweep_takes_only_runs_due_longer_than_the_grace(world: World) -> None:
    schedule = await world.seed(2, due_seconds_ago=120)
    await world.seed(3, first=100, due_seconds_ago=1, schedule=schedule)
    swept = (await world.keyed.sweep("a", 10, 30, grace_seconds=60)).runs
    assert len(swept) == 2 and await world.count("running") == 2
    assert await world.count(RunStatus.PENDING) == 3


async def test_the_fair_claim_leaves_runs_due_within_its_grace(world: World) -> None:
    # Kafka mode's claim while a partition is backlogged (ADR 0021): fair across tenants
    # like the polling claim, but a run due less than the grace is left to its key.
    late = await world.seed(2, due_seconds_ago=5)
    fresh = await world.seed(2, due_seconds_ago=0.2)
    batch = (await world.keyed.claim_fair("a", 10, 30, 1.0)).runs
    assert {run.schedule_id for run in batch} == {late.id}
    assert len(batch) == 2
    assert await world.count("pending") == 2  # the fresh ones
    assert fresh.id not in {run.schedule_id for run in batch}


async def test_an_overflow_report_is_seen_by_the_other_replicas_until_it_runs_out(
    world: World,
) -> None:
    """Kafka mode's overflow signal (ADR 0063): a replica's report holds for the seconds it
    gave, on the database's clock, for every replica but itself."""
    assert not await world.keyed.peer_overflowing("b")
    await world.keyed.report_overflow("a", 0.3)
    assert await world.keyed.peer_overflowing("b")
    assert not await world.keyed.peer_overflowing("a")  # its own report is not a peer's
    await world.keyed.report_overflow("a", 0.3)  # again: one row per replica, renewed
    await world.pass_time(0.5)
    assert not await world.keyed.peer_overflowing("b")
