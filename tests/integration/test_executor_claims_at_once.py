"""Two claims in flight at once from one executor (ADR 0042; postgres mode's default),
against real Postgres and a real sink: while a backlog lasts the second claim
loop claims beside the first, SKIP LOCKED keeps their batches apart (every run delivered
once), the slots both reserve never exceed the executor's workers, and an executor with
nothing due claims as one loop does."""

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
from cronwire.harness.seeding import seed_due_runs, seed_schedule, seed_tenant
from cronwire.service.executor import Executor, ExecutorSettings
from cronwire.service.signals import ExecutorSignals
from tests.support.executor_harness import OWNER, Harness, executor_harness, running
from tests.support.polling import wait_until
from tests.support.secrets import secret_box

WORKERS = 16
RUNS = 600


class _WatchedClaims(PostgresClaimSource):
    """Two claims at once (said here too, so the test keeps its premise whatever the
    default); counts the claims in flight and the slots they asked for."""

    claims_at_once = 2

    def __init__(self, pool: asyncpg.Pool) -> None:
        super().__init__(pool, secret_box(pool))
        self.calls = self.in_flight = self.most_in_flight = 0
        self.asked = self.most_asked = 0

    async def claim(self, owner: str, limit: int, lease_seconds: float) -> ClaimBatch:
        self.calls += 1
        self.in_flight += 1
        self.asked += limit
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        self.most_asked = max(self.most_asked, self.asked)
        try:
            # Simulated claim latency (a large claim under load takes tens of ms), so a
            # second claim has time to start beside it: not a wait for a state.
            await asyncio.sleep(0.02)
            return await super().claim(owner, limit, lease_seconds)
        finally:
            self.in_flight -= 1
            self.asked -= limit


@pytest.fixture
async def harness(db_pool: asyncpg.Pool) -> AsyncIterator[Harness]:
    async with executor_harness(db_pool) as harness:
        yield harness


def _executor(harness: Harness, claims: PostgresClaimSource) -> Executor:
    return build_executor(
        ExecutorSettings(
            owner=OWNER, workers=WORKERS, batch=WORKERS, lease_seconds=20.0,
            delivery_timeout=10.0, grace_seconds=5.0,
            breaker_policy=BreakerPolicy(failure_threshold=50, cooldown_seconds=60)),
        claims=claims, runs=PostgresRunStore(harness.pool),
        breakers=PostgresBreakerStore(harness.pool), deliverer=harness.deliverer,
        metrics=PrometheusMetrics(), clock=SystemClock(), signals=ExecutorSignals())


async def test_a_backlog_is_claimed_two_claims_at_a_time_and_delivered_once(
        harness: Harness) -> None:
    schedule = await seed_schedule(harness.pool, await seed_tenant(harness.pool),
                                   harness.sink.url)
    await seed_due_runs(harness.pool, schedule, RUNS)
    claims = _WatchedClaims(harness.pool)
    async with running(_executor(harness, claims)):
        await harness.sink.wait_for(lambda s: s.unique == RUNS, within=120)
    assert claims.most_in_flight == 2
    assert claims.most_asked <= WORKERS  # the second claim asks only for free slots
    assert harness.sink.duplicates == 0
    assert await harness.statuses() == {"succeeded": RUNS}


async def test_with_nothing_due_only_one_loop_claims(harness: Harness) -> None:
    claims = _WatchedClaims(harness.pool)
    async with running(_executor(harness, claims)):
        # Several idle claims (one a poll interval), each seen alone.
        await wait_until(lambda: claims.calls >= 5, within=30)
    assert claims.most_in_flight == 1
