"""The core ports: the clock, stage 1's planner store, stage 2's claim, run and breaker
stores and the deliverer (metrics and maintenance: :mod:`cronwire.ports.operations`).
Imported through :mod:`cronwire.ports`."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Collection, Sequence
from datetime import datetime
from typing import Protocol, runtime_checkable
from uuid import UUID

from cronwire.domain.breaker import BreakerPolicy, BreakerState
from cronwire.domain.delivery import DeliveryRequest, DeliveryResult
from cronwire.domain.model import (
    ClaimBatch,
    DueSchedule,
    LeaseKey,
    PlanDecision,
    RunResolution,
    RunStatus,
)
from cronwire.domain.planning import Span


class Clock(Protocol):
    """The replica's own clock. Due decisions never use it (Postgres ``now()`` does);
    it serves durations, HTTP timestamps and the clock-skew metric."""

    def now(self) -> datetime:
        """Aware UTC wall-clock time."""
        ...

    def monotonic(self) -> float:
        """Seconds from an arbitrary origin, never going backwards."""
        ...


class PlannerStore(Protocol):
    """Stage 1's transaction: claim due schedules, insert their runs, advance them."""

    async def plan_due(
        self,
        *,
        limit: int,
        lookahead_seconds: float,
        decide: Callable[[Sequence[DueSchedule], datetime, Span | None], PlanDecision],
        ahead_seconds: float | None = None,
    ) -> tuple[int, int]:
        """In ONE transaction: lock up to ``limit`` active schedules with
        ``next_fire_at <= now() + lookahead`` (``FOR UPDATE SKIP LOCKED``) or, given
        ``ahead_seconds``, the early pass's: due after the look-ahead but within
        ``ahead_seconds``, firing at most once per ``ahead_seconds``
        (``next_fire_at - last_fire_at >= ahead``, or never fired); call
        ``decide(schedules, db_now, writable)`` (pure, no I/O; ``writable`` is the span of
        existing job_run partitions around ``db_now``, None if none holds it), insert every planned run with
        ``ON CONFLICT DO NOTHING`` in one multi-row statement and apply every advance.
        Returns (schedules claimed, runs inserted), not counting the claimed schedules the
        decision passed over (``PlanDecision.passed_over``). Raises StorageError on
        failure, in which case nothing was written."""
        ...

    async def db_now(self) -> datetime:
        """Postgres ``now()``: the one clock authority for due decisions."""
        ...


class ClaimSource(Protocol):
    """Stage 2's claim step; the only piece that differs between postgres and kafka mode."""

    name: str  # label of scheduler_claims_total{source} when a batch names no sources
    # How many claims the executor may have in flight at once (ADR 0042).
    claims_at_once: int

    async def claim(self, owner: str, limit: int, lease_seconds: float) -> ClaimBatch:
        """Take leases on at most ``limit`` due runs (``pending``/``retrying``,
        ``fire_after <= now()``, no live lease) for ``owner``; each run in
        ``ClaimBatch.runs`` is ``running`` with ``claimed_by = owner`` and
        ``claim_expires_at = now() + lease_seconds``. Callers pass ``limit`` <= their idle
        workers (lease rule 1). Returns an empty batch when nothing is due; the batch also
        says which runs the claim ended instead of leasing them. Raises StorageError."""
        ...

    async def seconds_until_due(self) -> float | None:
        """Seconds (Postgres clock) until the earliest runnable run is due: <= 0 when one
        is due now, None when none is runnable. An idle executor sleeps that long (bounded
        by its poll interval) so runs planned ahead start on time, not a poll late.
        Raises StorageError."""
        ...

    async def close(self) -> None:
        """Release clients (Kafka consumer); idempotent."""
        ...

    async def wait_for_work(self, seconds: float) -> None:
        """Return when a claim may find work (a hint arrived) or after ``seconds``,
        whichever is first. Never raises; cancelling it is safe. The polling source has no
        notice of work, so it just sleeps; an idle executor waits here instead of polling
        a blocking claim, so shutdown is never held up by a consumer."""
        ...


class RunStore(Protocol):
    """Writes on leased runs, each predicated on ``claimed_by = owner`` and the lease
    generation the claim returned (lease rule 3). A :data:`LeaseKey` is
    ``(run_id, scheduled_for, lease_generation)``."""

    async def renew_leases(
        self, owner: str, runs: Sequence[LeaseKey], lease_seconds: float,
        started: Collection[UUID] = frozenset(),
    ) -> set[UUID]:
        """Extend the leases still held by ``owner`` under these generations, and record
        for the ids in ``started`` that their request has left (the claim's exhaustion
        rule counts only started attempts). Returns the ids still ours; a missing id means
        the lease is lost: cancel it."""
        ...

    async def superseded(self, owner: str, runs: Sequence[LeaseKey]) -> set[UUID]:
        """Of these leases of ``owner`` (cancel_other runs), the ids a newer occurrence of
        their schedule has superseded: their requests in flight are to be aborted."""
        ...

    async def resolve(
        self, owner: str, resolutions: Sequence[RunResolution]
    ) -> dict[UUID, RunStatus]:
        """Write terminal / retry states and attempt evidence for many runs in one
        transaction; applies only where the lease is still ours. Returns the ids whose
        write landed, with the status written (a retry of a run whose schedule was deleted
        meanwhile lands as ``cancelled``). Raises StorageError if the transaction failed
        as a whole."""
        ...

    async def ended_by_lease(
        self, owner: str, runs: Sequence[LeaseKey]
    ) -> dict[UUID, RunStatus]:
        """Of these leases, the runs our own earlier write already ended (no longer
        ``running``, same owner and generation), with their status: what a resolve whose
        reply was lost did. Raises StorageError."""
        ...

    async def fail_minimal(
        self, owner: str, run_id: UUID, scheduled_for: datetime, error: str, generation: int
    ) -> bool:
        """Last resort after a ``resolve`` the database rejected: drive one run to
        ``failed`` with the smallest possible write, predicated on the lease. True if it
        landed."""
        ...

    async def release(self, owner: str, runs: Sequence[LeaseKey]) -> int:
        """Give back leases not started (shutdown); the run returns to its previous
        runnable state. Only rows still ours are touched. Returns rows released."""
        ...

    async def defer(self, owner: str, runs: Sequence[LeaseKey], until: datetime) -> int:
        """Put leased runs back to be retried at ``until`` without consuming an attempt
        (open circuit breaker). Returns rows deferred."""
        ...


class Deliverer(Protocol):
    """Sends one attempt; never raises for delivery failures (they are outcomes).
    ``asyncio.CancelledError`` propagates when the executor abandons a lost lease."""

    async def deliver(self, request: DeliveryRequest) -> DeliveryResult: ...

    async def start(self) -> None: ...

    async def close(self) -> None: ...


@runtime_checkable
class StartsDeliveries(Protocol):
    """What a Deliverer may offer beside ``deliver``: the attempt started without a task
    where no wait is needed (docs/benchmarks.md#levers). ``begin`` returns the attempt's result as a future
    (same outcomes as ``deliver``; cancelling it abandons the request), or None when the
    caller should await ``deliver`` instead; RequestNotSent as from ``deliver``."""

    def begin(self, request: DeliveryRequest) -> asyncio.Future[DeliveryResult] | None: ...


class BreakerStore(Protocol):
    """Circuit-breaker state per (tenant, target key), shared by all replicas in Postgres.

    The transitions are :mod:`cronwire.domain.breaker`'s; the store only reads, locks and
    writes. Keys are ``(tenant_id, target_key(url))``."""

    async def open_states(
        self, keys: Sequence[tuple[UUID, str]]
    ) -> tuple[datetime, dict[tuple[UUID, str], BreakerState]]:
        """Postgres ``now()`` and the state of each of ``keys`` whose breaker is not
        closed (a key missing from the dict is closed). One round trip per claim batch."""
        ...

    async def try_probe(
        self, key: tuple[UUID, str], owner: str, probe_seconds: float
    ) -> bool:
        """Take the half-open probe of ``key`` if its cool-down is over (or the previous
        probe expired); True for exactly one caller among concurrent replicas."""
        ...

    async def record(
        self, outcomes: Sequence[tuple[UUID, str, bool]], policy: BreakerPolicy
    ) -> None:
        """Feed attempt outcomes ``(tenant_id, target_key, healthy)`` in the order they
        finished; applies the domain transitions under row locks in one transaction."""
        ...

    async def open_count(self) -> int:
        """Targets whose breaker is not closed (scheduler_breaker_open)."""
        ...
