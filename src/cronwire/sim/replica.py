"""One replica incarnation of the simulation: the real planner, executor (claim loop,
lease keeper, resolution writer) and, in kafka mode, the hybrid claim source and the
outbox relay, wired to the faulty ports as the composition root wires them to Postgres."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, cast

from cronwire.adapters.memory import (
    MemoryBreakerStore,
    MemoryClaimSource,
    MemoryKeyedClaims,
    MemoryPlannerStore,
)
from cronwire.bootstrap.executor import build_executor
from cronwire.domain.breaker import BreakerPolicy
from cronwire.ports import BreakerStore, ClaimSource, KeyedClaimStore, OutboxStore, PlannerStore
from cronwire.ports import RunStore as RunStorePort
from cronwire.service.executor import ExecutorSettings
from cronwire.service.executor.hybrid_claims import HybridClaimSource
from cronwire.service.outbox_relay import OutboxRelay
from cronwire.service.planner import Planner
from cronwire.sim.checker import Checker
from cronwire.sim.database import SimDatabase
from cronwire.sim.faults import FaultState, Life
from cronwire.sim.kafka_log import Log, MemoryOutbox, SimPublisher
from cronwire.sim.mutations import MutatedRunStore
from cronwire.sim.ports import CheckedRunStore, FaultyPort, HintsPort
from cronwire.sim.receivers import Receivers, SimDeliverer
from cronwire.sim.trace import Trace

# The replica's settings. The lease is shorter than the delivery deadline (production:
# twice as long), so that every receiver that hangs needs the lease keeper's renewals to
# keep its lease, not only requests caught in an outage (ADR 0062).
WORKERS = 4
LEASE_SECONDS = 4.0
DELIVERY_TIMEOUT = 5.0
GRACE_SECONDS = 2.0
POLL_SECONDS = 2.0
TICK_SECONDS = 2.0
SWEEP_SECONDS = 2.0
BREAKER = BreakerPolicy(failure_threshold=5, cooldown_seconds=10.0, probe_wait_seconds=5.0)
SWEEP_GRACE_SECONDS = 5.0


class ReplicaClock:
    """A replica's clock: the database's time plus this host's error, which the scenario
    makes jump; its monotonic clock is the loop's and never jumps."""

    def __init__(self, db_now: Callable[[], datetime], loop: asyncio.AbstractEventLoop) -> None:
        self._db_now = db_now
        self._loop = loop
        self.skew = timedelta(0)

    def now(self) -> datetime:
        return self._db_now() + self.skew

    def monotonic(self) -> float:
        return self._loop.time()


class QuietMetrics:
    """Metrics nobody reads."""

    def __getattr__(self, name: str) -> Callable[..., None]:
        return _nothing


def _nothing(*args: object, **kwargs: object) -> None:
    return None


@dataclass
class World:
    """What every replica shares."""

    seed: int
    mode: str
    mutation: str | None
    db: SimDatabase
    faults: FaultState
    trace: Trace
    checker: Checker
    receivers: Receivers
    log: Log | None


def start_replica(world: World, life: Life, clock: ReplicaClock,
                  stopping: asyncio.Event) -> list[asyncio.Task[None]]:
    """The replica's loops as tasks of the running (virtual-time) loop."""
    db = world.db

    def port(inner: object) -> Any:
        return FaultyPort(inner, life, world.faults, world.trace, world.checker)

    metrics: Any = QuietMetrics()
    run_store = cast(RunStorePort, port(CheckedRunStore(
        MutatedRunStore(db, world.mutation), db, world.checker, world.trace)))
    claims: ClaimSource
    tasks: list[asyncio.Task[None]] = []
    if world.mode == "kafka":
        assert world.log is not None
        hints = HintsPort(world.log.partitions[life.index], life)
        claims = HybridClaimSource(
            hints, cast(KeyedClaimStore, port(MemoryKeyedClaims(db))),
            cast(ClaimSource, port(MemoryClaimSource(db))), clock,
            grace_seconds=SWEEP_GRACE_SECONDS, sweep_seconds=SWEEP_SECONDS)
        relay = OutboxRelay(cast(OutboxStore, port(MemoryOutbox(db))),
                            SimPublisher(world.log, life), hints=hints,
                            sweep_grace_seconds=SWEEP_GRACE_SECONDS, poll_seconds=POLL_SECONDS)
        tasks.append(asyncio.create_task(relay.run(stopping), name=f"{life.owner}-relay"))
    else:
        claims = cast(ClaimSource, port(MemoryClaimSource(db)))
    executor = build_executor(
        ExecutorSettings(
            owner=life.owner, workers=WORKERS, batch=WORKERS, lease_seconds=LEASE_SECONDS,
            delivery_timeout=DELIVERY_TIMEOUT, grace_seconds=GRACE_SECONDS,
            poll_seconds=POLL_SECONDS, gauge_seconds=60.0, breaker_policy=BREAKER),
        claims=claims, runs=run_store, breakers=cast(BreakerStore, port(MemoryBreakerStore(db))),
        deliverer=SimDeliverer(
            world.receivers, life, clock, world.checker, world.faults,
            retry_after=random.Random(f"{world.seed}/{life.owner}").randint(1, 30)),
        metrics=metrics, clock=clock, rng=random.Random(f"{world.seed}/{life.owner}/retry"),
    )
    planner = Planner(cast(PlannerStore, port(MemoryPlannerStore(db))), metrics, batch=20,
                      tick_seconds=TICK_SECONDS, lookahead_seconds=5.0, monotonic=clock.monotonic)
    tasks.append(asyncio.create_task(executor.run(stopping), name=f"{life.owner}-executor"))
    tasks.append(asyncio.create_task(planner.run(stopping), name=f"{life.owner}-planner"))
    return tasks
