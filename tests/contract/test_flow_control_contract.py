"""Flow control's claim-side rules (ADR 0040), against the Postgres claim statements and
the in-memory fake alike (adapters/memory/flow_gate.py), so the simulator's replicas
(cronwire sim) meet the limits the real database enforces: a key's concurrency, its
token bucket, a Retry-After hold of the whole key, and slots given back by every write
that ends a lease and kept by an expired lease re-leased."""

from __future__ import annotations

from dataclasses import replace

import pytest

from cronwire.domain.model import RunStatus
from tests.support.resolutions import resolution
from tests.support.worlds import STORES, World, world_for

KEY = "shared-api"


@pytest.fixture(params=STORES)
def world(request: pytest.FixtureRequest) -> World:
    return world_for(request)


async def test_a_key_admits_no_more_than_its_concurrency_and_the_rest_stay_pending(
        world: World) -> None:
    schedule = await world.seed(12)
    await world.flow(schedule, KEY, max_concurrency=3)
    first = await world.claims.claim("a", 10, 30)
    second = await world.claims.claim("b", 10, 30)
    assert (len(first.runs), len(second.runs)) == (3, 0)
    assert {r.flow_key for r in first.runs} == {KEY}
    assert await world.count("running") == 3 and await world.count("pending") == 9
    assert (await world.flow_row(schedule.tenant_id, KEY)) == (3, False)


async def test_every_write_that_ends_a_lease_gives_its_slot_back_and_an_expired_one_keeps_it(
        world: World) -> None:
    schedule = await world.seed(10)
    await world.flow(schedule, KEY, max_concurrency=3)
    runs = list((await world.claims.claim("a", 10, 30)).runs)
    await world.runs.resolve("a", [resolution(runs[0], RunStatus.SUCCEEDED)])
    await world.runs.release("a", [(runs[1].id, runs[1].scheduled_for, runs[1].lease_generation)])
    assert await world.runs.fail_minimal("a", runs[2].id, runs[2].scheduled_for, "gave up",
                                         runs[2].lease_generation)
    assert (await world.flow_row(schedule.tenant_id, KEY)) == (0, False)
    again = list((await world.claims.claim("b", 10, 30)).runs)
    assert len(again) == 3
    for run in again:  # b is killed -9: its leases run out with their slots
        await world.expire(run.id)
    reclaimed = (await world.claims.claim("c", 10, 30)).runs
    assert {r.id for r in reclaimed} == {r.id for r in again}
    assert (await world.flow_row(schedule.tenant_id, KEY)) == (3, False)
    await world.runs.resolve("c", [resolution(r, RunStatus.SUCCEEDED) for r in reclaimed])
    assert (await world.flow_row(schedule.tenant_id, KEY)) == (0, False)


async def test_the_bucket_admits_its_burst_then_refills_at_the_rate(world: World) -> None:
    schedule = await world.seed(10)
    await world.flow(schedule, KEY, rate_per_second=2, burst=2)
    assert len((await world.claims.claim("a", 10, 30)).runs) == 2
    assert len((await world.claims.claim("a", 10, 30)).runs) == 0
    await world.pass_time(1.05)  # two more tokens, not three
    assert len((await world.claims.claim("a", 10, 30)).runs) == 2


async def test_a_retry_after_holds_the_key_on_every_replica_until_it_is_over(
        world: World) -> None:
    schedule = await world.seed(4)
    await world.flow(schedule, KEY)  # no limits: only the receiver's backpressure
    [first] = (await world.claims.claim("a", 1, 30)).runs
    throttled = replace(resolution(first, RunStatus.RETRYING, delay=0.5), hold_seconds=1.0)
    assert await world.runs.resolve("a", [throttled])
    assert (await world.flow_row(schedule.tenant_id, KEY)) == (0, True)
    assert (await world.claims.claim("b", 10, 30)).runs == ()
    await world.pass_time(1.1)
    assert len((await world.claims.claim("b", 10, 30)).runs) == 4
