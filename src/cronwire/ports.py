"""Every seam the services depend on, as small ``typing.Protocol`` classes.

Services import these and the domain, never an adapter. Each method says what it
means and how it fails. Adapter errors are translated to :mod:`cronwire.errors` at the
adapter boundary; a Protocol method never leaks a driver exception type.

Lease rule 3 (seed ADR): every RunStore write on a leased run takes the ``owner`` and
applies only where ``claimed_by = owner`` still holds; the return value tells the
caller which writes landed so it can count lost leases instead of guessing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Protocol
from uuid import UUID

from cronwire.domain.delivery import DeliveryRequest, DeliveryResult
from cronwire.domain.model import (
    ClaimedRun,
    DueSchedule,
    PlanDecision,
    RunResolution,
)


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
        decide: Callable[[Sequence[DueSchedule], datetime], PlanDecision],
    ) -> tuple[int, int]:
        """In ONE transaction: lock up to ``limit`` active schedules with
        ``next_fire_at <= now() + lookahead`` (``FOR UPDATE SKIP LOCKED``), call
        ``decide(schedules, db_now)`` (pure, no I/O), insert every planned run with
        ``ON CONFLICT DO NOTHING`` in one multi-row statement and apply every advance.
        Returns (schedules claimed, runs inserted). Raises StorageError on failure, in
        which case nothing was written."""
        ...

    async def db_now(self) -> datetime:
        """Postgres ``now()``: the one clock authority for due decisions."""
        ...


class ClaimSource(Protocol):
    """Stage 2's claim step; the only piece that differs between postgres and kafka mode."""

    name: str  # label of scheduler_claims_total{source}

    async def claim(self, owner: str, limit: int, lease_seconds: float) -> Sequence[ClaimedRun]:
        """Take leases on at most ``limit`` due runs (``pending``/``retrying``,
        ``fire_after <= now()``, no live lease) for ``owner``; each returned run is
        ``running`` with ``claimed_by = owner`` and ``claim_expires_at = now() +
        lease_seconds``. Callers pass ``limit`` <= their idle workers (lease rule 1).
        Returns an empty sequence when nothing is due."""
        ...

    async def close(self) -> None:
        """Release clients (Kafka consumer); idempotent."""
        ...


class RunPublisher(Protocol):
    """Kafka mode's hint channel: run ids published after the planner commits."""

    async def publish_pending(self, limit: int) -> int:
        """Publish up to ``limit`` committed, unpublished, runnable run ids (outbox) and
        mark them published; returns how many. A no-op returning 0 in postgres mode."""
        ...


class RunStore(Protocol):
    """Writes on leased runs, each predicated on ``claimed_by = owner`` (lease rule 3)."""

    async def renew_leases(
        self, owner: str, runs: Sequence[tuple[UUID, datetime]], lease_seconds: float
    ) -> set[UUID]:
        """Extend the leases of (run_id, scheduled_for) pairs still held by ``owner``;
        returns the ids still ours. A missing id means the lease is lost: cancel it."""
        ...

    async def resolve(self, owner: str, resolutions: Sequence[RunResolution]) -> set[UUID]:
        """Write terminal / retry states and attempt evidence for many runs in one
        transaction; applies only where the lease is still ours. Returns the ids whose
        write landed. Raises StorageError if the transaction failed as a whole."""
        ...

    async def fail_minimal(self, owner: str, run_id: UUID, scheduled_for: datetime, error: str) -> bool:
        """Last resort after a failed ``resolve``: drive one run to ``failed`` with the
        smallest possible write, predicated on the lease. True if it landed."""
        ...

    async def release(self, owner: str, runs: Sequence[tuple[UUID, datetime]]) -> int:
        """Give back leases not started (shutdown); the run returns to its previous
        runnable state. Only rows still ours are touched. Returns rows released."""
        ...

    async def defer(
        self, owner: str, runs: Sequence[tuple[UUID, datetime]], until: datetime
    ) -> int:
        """Put leased runs back to be retried at ``until`` without consuming an attempt
        (open circuit breaker). Returns rows deferred."""
        ...

    async def due_backlog(self) -> int:
        """Runs due and not terminal (scheduler_runs_due_backlog)."""
        ...


class Deliverer(Protocol):
    """Sends one attempt; never raises for delivery failures (they are outcomes).
    ``asyncio.CancelledError`` propagates when the executor abandons a lost lease."""

    async def deliver(self, request: DeliveryRequest) -> DeliveryResult: ...

    async def start(self) -> None: ...

    async def close(self) -> None: ...


class Metrics(Protocol):
    """The Prometheus series of CONTRACT.md, behind a seam so services stay pure."""

    def claims(self, source: str, count: int) -> None: ...

    def run_finished(self, outcome: str) -> None: ...

    def lease_lost(self, count: int = 1) -> None: ...

    def fire_lag(self, seconds: float) -> None: ...

    def delivery_duration(self, seconds: float) -> None: ...

    def planner_tick(self, seconds: float) -> None: ...

    def set_backlog(self, runs: int) -> None: ...

    def set_clock_skew(self, seconds: float) -> None: ...

    def set_breakers_open(self, targets: int) -> None: ...
