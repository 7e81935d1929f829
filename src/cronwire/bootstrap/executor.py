"""The executor assembled: its settings and ports in, its collaborators built and joined
here, and only here (the container, the simulator's replicas, the tests and the
benchmarks all call :func:`build_executor`).

Each collaborator owns its state and the others ask it: the lease keeper the held
leases, the deliveries the requests in flight, the writer its buffer, the database clock
the offset the claim loop measures.
"""

from __future__ import annotations

import random

from cronwire.domain.retry import Uniform
from cronwire.ports import BreakerStore, ClaimSource, Clock, Deliverer, Metrics, RunStore, Tracer
from cronwire.ports.observability import TRACING_OFF
from cronwire.service.executor import Executor, ExecutorSettings
from cronwire.service.executor.breaker_gate import BreakerGate
from cronwire.service.executor.claim_wake import ClaimWake
from cronwire.service.executor.database_clock import DatabaseClock
from cronwire.service.executor.deliveries import Deliveries
from cronwire.service.executor.lease_keeper import LeaseKeeper
from cronwire.service.executor.resolution_writer import ResolutionWriter
from cronwire.service.signals import ExecutorSignals, quiet_signals


def build_executor(
    settings: ExecutorSettings,
    *,
    claims: ClaimSource,
    runs: RunStore,
    breakers: BreakerStore,
    deliverer: Deliverer,
    metrics: Metrics,
    clock: Clock,
    signals: ExecutorSignals | None = None,
    tracer: Tracer | None = None,
    rng: Uniform | None = None,
) -> Executor:
    signals = signals or quiet_signals()
    tracer = tracer or TRACING_OFF
    owner, lease_seconds = settings.owner, settings.lease_seconds
    keeper = LeaseKeeper(runs, metrics, owner=owner, lease_seconds=lease_seconds,
                         signals=signals)
    writer = ResolutionWriter(
        runs, breakers, keeper, metrics, owner=owner, breaker_policy=settings.breaker_policy,
        lease_seconds=lease_seconds, signals=signals, max_batch=settings.max_write_batch,
        tracer=tracer,
    )
    gate = BreakerGate(breakers, owner=owner, policy=settings.breaker_policy,
                       probe_seconds=lease_seconds)
    wake, database_clock = ClaimWake(), DatabaseClock()
    deliveries = Deliveries(
        deliverer, runs, keeper, writer, metrics, clock, wake, database_clock,
        owner=owner, delivery_timeout=settings.delivery_timeout,
        rng=rng or random.Random(), signals=signals, tracer=tracer,
    )
    return Executor(
        settings, claims, runs, keeper=keeper, writer=writer, gate=gate,
        deliveries=deliveries, wake=wake, database_clock=database_clock, metrics=metrics,
        clock=clock, signals=signals, tracer=tracer,
    )
