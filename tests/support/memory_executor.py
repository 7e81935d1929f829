"""An Executor wired to the in-memory stores, a scripted deliverer and counting metrics:
the service under test with no database and no network."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from cronwire.adapters.memory import (
    MemoryBreakerStore,
    MemoryClaimSource,
    MemoryDatabase,
    MemoryRunStore,
)
from cronwire.bootstrap.executor import build_executor
from cronwire.domain.breaker import BreakerPolicy
from cronwire.domain.model import RetryPolicy
from cronwire.ports import ClaimSource, RunStore
from cronwire.service.executor import Executor, ExecutorSettings
from cronwire.service.signals import ExecutorSignals
from tests.support.executor_harness import running
from tests.support.fakes import CountingMetrics, ScriptedDeliverer

OWNER = "unit-executor"
URL = "http://127.0.0.1:9/hook"
FAST_RETRY = RetryPolicy(max_attempts=3, initial_backoff_seconds=0.01, max_backoff_seconds=0.02)


@dataclass
class Rig:
    db: MemoryDatabase = field(default_factory=MemoryDatabase)
    deliverer: ScriptedDeliverer = field(default_factory=ScriptedDeliverer)
    metrics: CountingMetrics = field(default_factory=CountingMetrics)
    signals: ExecutorSignals = field(default_factory=ExecutorSignals)

    def seed(self, count: int, *, retry: RetryPolicy = FAST_RETRY, url: str = URL):  # type: ignore[no-untyped-def]
        schedule = self.db.add_schedule(self.db.add_tenant(), url, retry=retry)
        self.db.add_due_runs(schedule.id, count)
        return schedule

    def executor(self, run_store: RunStore | None = None, *,
                 claim_source: ClaimSource | None = None, **overrides: Any) -> Executor:
        options: dict[str, Any] = dict(
            owner=OWNER, workers=8, batch=8, lease_seconds=3.0, delivery_timeout=1.0,
            grace_seconds=1.0, poll_seconds=0.02, gauge_seconds=0.05,
            breaker_policy=BreakerPolicy(failure_threshold=50, cooldown_seconds=60),
        )
        tracer = overrides.pop("tracer", None)
        options.update(overrides)
        return build_executor(
            ExecutorSettings(**options), claims=claim_source or MemoryClaimSource(self.db),
            runs=run_store or MemoryRunStore(self.db), breakers=MemoryBreakerStore(self.db),
            deliverer=self.deliverer, metrics=self.metrics, clock=self.db.clock,
            signals=self.signals, tracer=tracer,
        )

    def statuses(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for run in self.db.runs.values():
            counts[str(run.status)] = counts.get(str(run.status), 0) + 1
        return counts

    @contextlib.asynccontextmanager
    async def running(self, executor: Executor) -> AsyncIterator[asyncio.Event]:
        """The executor's loop as a task; held requests let go, then stopped and drained."""
        async with running(executor) as stopping:
            try:
                yield stopping
            finally:
                self.deliverer.hold.set()

    async def stopped_after_starting(self, executor: Executor, started: int) -> None:
        """Run ``executor`` until ``started`` requests are in flight, then stop it and wait
        (at most 10 s) for its shutdown to end."""
        stopping = asyncio.Event()
        task = asyncio.create_task(executor.run(stopping))
        await self.signals.started.wait_count(started, within=10)
        stopping.set()
        async with asyncio.timeout(10):
            await task
