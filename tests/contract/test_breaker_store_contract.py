"""The BreakerStore contract, against PostgresBreakerStore and the in-memory fake: state
shared by key, the domain's transitions, one probe winner."""

from __future__ import annotations

from datetime import timedelta

import pytest

from cronwire.domain.breaker import BreakerPolicy, BreakerStatus
from tests.support.worlds import STORES, World, world_for

KEY = "http://127.0.0.1:9"
COOLING = BreakerPolicy(failure_threshold=3, cooldown_seconds=3600)
COOLED = BreakerPolicy(failure_threshold=1, cooldown_seconds=0)


@pytest.fixture(params=STORES)
def world(request: pytest.FixtureRequest) -> World:
    return world_for(request)


async def test_every_breaker_starts_closed(world: World) -> None:
    tenant = (await world.seed(0)).tenant_id
    now, states = await world.breakers.open_states([(tenant, KEY)])
    assert states == {} and abs((now - await world.db_now()).total_seconds()) < 5
    assert await world.breakers.open_count() == 0
    assert await world.breakers.try_probe((tenant, KEY), "a", 30) is False


async def test_consecutive_failures_open_it_and_a_success_closes_it(world: World) -> None:
    tenant = (await world.seed(0)).tenant_id
    other = (await world.seed(0)).tenant_id
    await world.breakers.record([(tenant, KEY, False), (tenant, KEY, False)], COOLING)
    assert (await world.breakers.open_states([(tenant, KEY)]))[1] == {}
    await world.breakers.record([(tenant, KEY, False), (other, KEY, True)], COOLING)
    now, states = await world.breakers.open_states([(tenant, KEY), (other, KEY)])
    state = states[(tenant, KEY)]
    assert set(states) == {(tenant, KEY)} and state.status is BreakerStatus.OPEN
    assert state.failures == 3 and state.opened_until is not None
    assert timedelta(minutes=59) < state.opened_until - now <= timedelta(hours=1)
    assert await world.breakers.open_count() == 1
    assert await world.breakers.try_probe((tenant, KEY), "a", 30) is False  # cooling down
    await world.breakers.record([(tenant, KEY, True)], COOLING)
    assert (await world.breakers.open_states([(tenant, KEY)]))[1] == {}
    assert await world.breakers.open_count() == 0


async def test_one_caller_wins_the_half_open_probe(world: World) -> None:
    tenant = (await world.seed(0)).tenant_id
    await world.breakers.record([(tenant, KEY, False)], COOLED)
    assert await world.breakers.try_probe((tenant, KEY), "a", 30) is True
    assert await world.breakers.try_probe((tenant, KEY), "b", 30) is False
    _, states = await world.breakers.open_states([(tenant, KEY)])
    state = states[(tenant, KEY)]
    assert (state.status, state.probe_by) == (BreakerStatus.HALF_OPEN, "a")
    await world.breakers.record([(tenant, KEY, False)], COOLING)  # the probe failed
    _, states = await world.breakers.open_states([(tenant, KEY)])
    assert states[(tenant, KEY)].status is BreakerStatus.OPEN
