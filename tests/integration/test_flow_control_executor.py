"""The executor's claim loop beside a key at its limit, against real Postgres and a real
sink (ADR 0040): runs a key holds back are due and stay due, which must not make an idle
executor claim in a tight loop, nor hide another run falling due meanwhile."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import asyncpg
import pytest

from cronwire.adapters.clock import SystemClock
from cronwire.adapters.metrics import PrometheusMetrics
from cronwire.adapters.postgres.breaker_store import PostgresBreakerStore
from cronwire.adapters.postgres.claim_source import PostgresClaimSource
from cronwire.adapters.postgres.run_store import PostgresRunStore
from cronwire.bootstrap.executor import build_executor
from cronwire.domain.breaker import BreakerPolicy
from cronwire.domain.model import ClaimBatch
from cronwire.harness.seeding import seed_due_runs, seed_flow_control, seed_schedule, seed_tenant
from cronwire.harness.sink import Reply, always
from cronwire.service.executor import ExecutorSettings
from cronwire.service.signals import ExecutorSignals
from tests.support.executor_harness import OWNER, Harness, executor_harness, running
from tests.support.secrets import secret_box

POLL_SECONDS = 0.25  # the claim loop's longest wait (its default)


class _CountingClaims(PostgresClaimSource):
    def __init__(self, pool: asyncpg.Pool) -> None:
        super().__init__(pool, secret_box(pool))
        self.claims = 0

    async def claim(self, owner: str, limit: int, lease_seconds: float) -> ClaimBatch:
        self.claims += 1
        return await super().claim(owner, limit, lease_seconds)


@pytest.fixture
async def harness(db_pool: asyncpg.Pool) -> AsyncIterator[Harness]:
    async with executor_harness(db_pool) as harness:
        yield harness


async def test_an_executor_beside_a_full_key_does_not_claim_in_a_tight_loop(
        harness: Harness) -> None:
    # One request of the key is held at the receiver; nine more runs of it are due and
    # held back. Before the fix the loop saw "a run is overdue" after every empty claim
    # and claimed again 10 ms later: about a hundred claims a second, each reading the
    # key's backlog, on every replica, for as long as the key stayed full.
    release = asyncio.Event()
    harness.sink.behaviour = always(Reply(hold=release))
    tenant = await seed_tenant(harness.pool)
    schedule = await seed_schedule(harness.pool, tenant, harness.sink.url)
    await seed_flow_control(harness.pool, schedule, "receiver", max_concurrency=1)
    await seed_due_runs(harness.pool, schedule, 10)
    claims = _CountingClaims(harness.pool)
    executor = build_executor(
        ExecutorSettings(owner=OWNER, workers=8, batch=8, lease_seconds=20.0,
                         delivery_timeout=10.0, grace_seconds=5.0, poll_seconds=POLL_SECONDS,
                         gauge_seconds=0.1,
                         breaker_policy=BreakerPolicy(failure_threshold=50, cooldown_seconds=60)),
        claims=claims, runs=PostgresRunStore(harness.pool),
        breakers=PostgresBreakerStore(harness.pool), deliverer=harness.deliverer,
        metrics=PrometheusMetrics(), clock=SystemClock(), signals=ExecutorSignals())
    try:
        async with running(executor):
            await harness.sink.wait_for(lambda s: len(s.arrivals) == 1, within=30)
            before, began = claims.claims, asyncio.get_running_loop().time()
            await asyncio.sleep(2.0)  # a window to count claims in, not a wait for a state
            window = asyncio.get_running_loop().time() - began
            claimed = claims.claims - before
            # Once a poll interval, and a few more while it backs off from 10 ms.
            assert claimed <= window / POLL_SECONDS + 8, claimed
            assert len(harness.sink.arrivals) == 1  # the limit held meanwhile
            release.set()
            # A freed slot wakes the loop: the rest go one at a time, none lost.
            await harness.sink.wait_for(lambda s: s.unique == 10, within=60)
    finally:
        release.set()


async def test_after_empty_claims_the_wait_doubles_but_ends_when_a_run_falls_due(
        db_pool: asyncpg.Pool) -> None:
    tenant = await seed_tenant(db_pool)
    schedule = await seed_schedule(db_pool, tenant, "http://127.0.0.1:9/hook")
    await seed_flow_control(db_pool, schedule, "receiver", max_concurrency=1)
    await seed_due_runs(db_pool, schedule, 3)
    source = PostgresClaimSource(db_pool, secret_box(db_pool))
    assert len((await source.claim("a", 10, 30)).runs) == 1
    overdue = await source.seconds_until_due()
    assert overdue is not None and overdue < 0  # no empty claim yet: overdue, as ever
    waits = []
    for _ in range(12):
        assert (await source.claim("a", 10, 30)).runs == ()  # the key is full
        waits.append(await source.seconds_until_due())
    assert waits[:3] == pytest.approx([0.01, 0.02, 0.04])
    assert waits[-1] == pytest.approx(10.24)  # the claim loop caps it at its poll
    # Another tenant's run falls due in two seconds: the wait ends then, not later.
    other = await seed_schedule(db_pool, await seed_tenant(db_pool), "http://127.0.0.1:9/hook")
    await seed_due_runs(db_pool, other, 1, first=50, due_seconds_ago=-2.0)
    fresh = await source.seconds_until_due()
    assert fresh is not None and 1.0 < fresh <= 2.0
