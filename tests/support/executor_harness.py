"""An Executor on real Postgres delivering to a real HTTP sink on loopback: the harness
of tests/integration/test_executor*.py."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import asyncpg

from cronwire.adapters.clock import SystemClock
from cronwire.adapters.http.guard import TargetGuard
from cronwire.adapters.http.lean_deliverer import LeanDeliverer
from cronwire.adapters.metrics import PrometheusMetrics
from cronwire.adapters.postgres.breaker_store import PostgresBreakerStore
from cronwire.adapters.postgres.claim_source import PostgresClaimSource
from cronwire.adapters.postgres.run_store import PostgresRunStore
from cronwire.bootstrap.executor import build_executor
from cronwire.domain.breaker import BreakerPolicy
from cronwire.harness.seeding import SeededSchedule, seed_due_runs, seed_schedule, seed_tenant
from cronwire.harness.sink import Sink
from cronwire.service.executor import Executor, ExecutorSettings
from cronwire.service.signals import ExecutorSignals
from tests.support.polling import wait_until
from tests.support.secrets import secret_box

OWNER = "executor-under-test"



@dataclass
class Harness:
    pool: asyncpg.Pool
    sink: Sink
    deliverer: LeanDeliverer

    async def schedule(self, count: int, *, url: str | None = None, **kwargs: Any) -> SeededSchedule:
        async with self.pool.acquire() as conn:
            schedule = await seed_schedule(
                conn, await seed_tenant(conn), url or self.sink.url, **kwargs
            )
            await seed_due_runs(conn, schedule, count)
        return schedule

    def executor(self, **overrides: Any) -> tuple[Executor, ExecutorSignals, PrometheusMetrics]:
        signals, metrics = ExecutorSignals(), PrometheusMetrics()
        options: dict[str, Any] = dict(
            owner=OWNER, workers=16, batch=16, lease_seconds=6.0, delivery_timeout=3.0,
            grace_seconds=5.0, poll_seconds=0.05, gauge_seconds=0.1,
            breaker_policy=BreakerPolicy(failure_threshold=50, cooldown_seconds=60),
        )
        options.update(overrides)
        executor = build_executor(
            ExecutorSettings(**options),
            claims=PostgresClaimSource(self.pool, secret_box(self.pool)),
            runs=PostgresRunStore(self.pool), breakers=PostgresBreakerStore(self.pool),
            deliverer=self.deliverer, metrics=metrics, clock=SystemClock(), signals=signals,
        )
        return executor, signals, metrics

    async def statuses(self) -> dict[str, int]:
        rows = await self.pool.fetch("SELECT status, count(*) AS n FROM job_run GROUP BY status")
        return {r["status"]: r["n"] for r in rows}

    async def until(self, check: Callable[[], Any], within: float = 10.0) -> None:
        """Poll an async database condition with a deadline (never a fixed sleep)."""
        await wait_until(check, within)



@contextlib.asynccontextmanager
async def executor_harness(pool: asyncpg.Pool) -> AsyncIterator[Harness]:
    deliverer = LeanDeliverer(TargetGuard(allow_private=True))
    await deliverer.start()
    async with Sink() as sink:
        yield Harness(pool, sink, deliverer)
    await deliverer.close()

@contextlib.asynccontextmanager
async def running(executor: Executor) -> AsyncIterator[asyncio.Event]:
    stopping = asyncio.Event()
    task = asyncio.create_task(executor.run(stopping))
    try:
        yield stopping
    finally:
        stopping.set()
        await asyncio.wait_for(task, 15)


def sample(metrics: PrometheusMetrics, name: str, **labels: str) -> float:
    return metrics.registry.get_sample_value(name, labels) or 0.0
