"""The executor against both claim sources (polling, and kafka mode's hybrid with the
outbox relay running), real Postgres, real broker, real HTTP sink: the executor does not
know which mode it runs in, and each mode keeps the same guarantees."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass

import asyncpg
import pytest

from cronwire.adapters.clock import SystemClock
from cronwire.adapters.http.guard import TargetGuard
from cronwire.adapters.http.lean_deliverer import LeanDeliverer
from cronwire.adapters.metrics import PrometheusMetrics
from cronwire.adapters.postgres.breaker_store import PostgresBreakerStore
from cronwire.adapters.postgres.claim_source import PostgresClaimSource
from cronwire.adapters.postgres.run_store import PostgresRunStore
from cronwire.bootstrap.executor import build_executor
from cronwire.domain.model import ClaimBatch, RunStatus
from cronwire.harness.seeding import seed_due_runs, seed_schedule, seed_tenant
from cronwire.harness.sink import Reply, Sink, by_attempt
from cronwire.ports import ClaimSource
from cronwire.service.executor import ExecutorSettings
from cronwire.service.signals import ExecutorSignals
from tests.support.brokers import KAFKA_BROKERS, bootstrap_of, broker_params
from tests.support.kafka import kafka_mode
from tests.support.secrets import secret_box


@dataclass
class Mode:
    name: str
    source: ClaimSource
    labels: frozenset[str]


@pytest.fixture(params=["postgres", *(f"kafka-{k}" for k in broker_params(*KAFKA_BROKERS))])
def broker(request: pytest.FixtureRequest) -> str | None:
    """The mode's broker (kafka mode on every broker kind), resolved outside the loop."""
    if request.param == "postgres":
        return None
    return bootstrap_of(request, request.param.removeprefix("kafka-"))


@pytest.fixture
async def mode(broker: str | None, db_pool: asyncpg.Pool) -> AsyncIterator[Mode]:
    if broker is None:
        yield Mode("postgres", PostgresClaimSource(db_pool, secret_box(db_pool)), frozenset({"postgres"}))
        return
    async with kafka_mode(db_pool, broker) as kafka:
        stopping = asyncio.Event()
        relay = asyncio.create_task(kafka.relay.run(stopping))
        try:
            yield Mode("kafka", kafka.source, frozenset({"kafka", "sweeper"}))
        finally:
            stopping.set()
            await relay


@pytest.fixture
async def sink() -> AsyncIterator[Sink]:
    async with Sink() as running:
        yield running


@contextlib.asynccontextmanager
async def executor(
    pool: asyncpg.Pool, source: ClaimSource
) -> AsyncIterator[tuple[ExecutorSignals, PrometheusMetrics]]:
    deliverer = LeanDeliverer(TargetGuard(allow_private=True))
    await deliverer.start()
    signals, metrics = ExecutorSignals(), PrometheusMetrics()
    worker = build_executor(
        ExecutorSettings(owner="under-test", workers=16, batch=16, lease_seconds=6.0,
                         delivery_timeout=3.0, grace_seconds=5.0, poll_seconds=0.05,
                         gauge_seconds=0.1),
        claims=source, runs=PostgresRunStore(pool), breakers=PostgresBreakerStore(pool),
        deliverer=deliverer, metrics=metrics, clock=SystemClock(), signals=signals,
    )
    stopping = asyncio.Event()
    task = asyncio.create_task(worker.run(stopping))
    try:
        yield signals, metrics
    finally:
        stopping.set()
        await asyncio.wait_for(task, 15)
        await deliverer.close()


async def _seed(pool: asyncpg.Pool, url: str, count: int, **kwargs: object) -> None:
    async with pool.acquire() as conn:
        schedule = await seed_schedule(conn, await seed_tenant(conn), url, **kwargs)  # type: ignore[arg-type]
        await seed_due_runs(conn, schedule, count)


def _claims(metrics: PrometheusMetrics, labels: frozenset[str]) -> float:
    return sum(metrics.registry.get_sample_value("scheduler_claims_total", {"source": label})
               or 0.0 for label in labels)


async def test_due_runs_are_delivered_once_and_counted_under_the_modes_labels(
    mode: Mode, db_pool: asyncpg.Pool, sink: Sink
) -> None:
    await _seed(db_pool, sink.url, 40)
    async with executor(db_pool, mode.source) as (signals, metrics):
        await signals.settled.wait_count(40, within=30)
    assert sink.unique == 40 and sink.duplicates == 0
    assert _claims(metrics, mode.labels) == 40


async def test_a_retry_is_claimed_again_when_it_falls_due(
    mode: Mode, db_pool: asyncpg.Pool, sink: Sink
) -> None:
    """In kafka mode the retry's key is published again (published_at was reset)."""
    sink.behaviour = by_attempt({1: Reply(500)})
    await _seed(db_pool, sink.url, 3,
                retry={"max_attempts": 3, "initial_backoff_seconds": 0.2, "max_backoff_seconds": 0.3})
    async with executor(db_pool, mode.source) as (signals, metrics):
        await signals.settled.wait_for(
            lambda items: sum(s is RunStatus.SUCCEEDED for _, s in items) == 3, within=30)
    assert [a.attempt for a in sink.arrivals].count(2) == 3
    if mode.name == "kafka":
        kafka = metrics.registry.get_sample_value("scheduler_claims_total", {"source": "kafka"})
        assert kafka == 6  # both attempts of every run came by message, not by the sweeper


class _InFlight:
    """The mode's source, counting its claims in flight (ADRs 0042 and 0063)."""

    def __init__(self, inner: ClaimSource) -> None:
        self._inner = inner
        self.name = inner.name
        self.claims_at_once = inner.claims_at_once
        self.in_flight = self.most_in_flight = 0

    async def claim(self, owner: str, limit: int, lease_seconds: float) -> ClaimBatch:
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            # Simulated claim latency (a large claim under load takes tens of ms), so a
            # second claim has time to start beside it: not a wait for a state.
            await asyncio.sleep(0.02)
            return await self._inner.claim(owner, limit, lease_seconds)
        finally:
            self.in_flight -= 1

    async def seconds_until_due(self) -> float | None:
        return await self._inner.seconds_until_due()

    async def wait_for_work(self, seconds: float) -> None:
        await self._inner.wait_for_work(seconds)

    async def close(self) -> None:
        await self._inner.close()


async def test_a_backlog_is_claimed_two_claims_at_a_time_and_delivered_once(
    mode: Mode, db_pool: asyncpg.Pool, sink: Sink
) -> None:
    # Kafka mode kept one claim in flight before ADR 0063 (its consumed keys are settled as
    # a whole); now only one of its two claims takes keys.
    await _seed(db_pool, sink.url, 400)
    source = _InFlight(mode.source)
    async with executor(db_pool, source) as (signals, metrics):
        await signals.settled.wait_count(400, within=60)
    assert source.most_in_flight == 2
    assert sink.unique == 400 and sink.duplicates == 0
    assert _claims(metrics, mode.labels) == 400
