"""Every seam the services depend on, as small ``typing.Protocol`` classes.

Services import these and the domain, never an adapter. Each method says what it
means and how it fails. Adapter errors are translated to :mod:`cronwire.errors` at the
adapter boundary; a Protocol method never leaks a driver exception type.

Lease rule 3 (seed ADR): every RunStore write on a leased run takes the ``owner`` and
applies only where ``claimed_by = owner`` still holds; the return value tells the
caller which writes landed so it can count lost leases instead of guessing.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Sequence
from datetime import datetime
from typing import Protocol
from uuid import UUID

from cronwire.domain.breaker import BreakerPolicy, BreakerState
from cronwire.domain.delivery import DeliveryRequest, DeliveryResult
from cronwire.domain.history import RunDetail, RunQuery, RunView
from cronwire.domain.model import (
    ClaimBatch,
    ClaimedRun,
    DueSchedule,
    LeaseKey,
    PlanDecision,
    RunResolution,
    RunStatus,
)
from cronwire.domain.planning import Span
from cronwire.domain.schedules import ScheduleRecord, ScheduleSpec, TenantLimits


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
    ) -> tuple[int, int]:
        """In ONE transaction: lock up to ``limit`` active schedules with
        ``next_fire_at <= now() + lookahead`` (``FOR UPDATE SKIP LOCKED``), call
        ``decide(schedules, db_now, writable)`` (pure, no I/O; ``writable`` is the span of
        existing job_run partitions around ``db_now``, None if none holds it), insert every planned run with
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
        Returns an empty sequence when nothing is due; a :class:`ClaimBatch` also says
        which runs the claim ended instead of leasing them."""
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


# -- Kafka mode (issue 9): keys, never payloads; Postgres stays the source of truth --

RunKey = tuple[UUID, datetime]  # (run_id, scheduled_for): scheduled_for prunes to a partition


class RunHints(Protocol):
    """Run keys a broker delivered (Kafka consumer). A hint is never authority: the claim
    re-checks everything in Postgres, and a key that is not claimable is dropped."""

    @property
    def healthy(self) -> bool:
        """False while the broker is unreachable (the hybrid source degrades to its sweeper)."""
        ...

    def take(self, limit: int) -> list[RunKey]:
        """Up to ``limit`` delivered keys not taken yet, oldest first; never blocks."""
        ...

    async def wait(self, seconds: float) -> None:
        """Until keys are waiting to be taken, or ``seconds``."""
        ...

    def acknowledge(self) -> None:
        """Every key taken so far is settled (claimed, or not claimable): their offsets may
        be committed. Called only after the claim transaction committed."""
        ...

    def rewind(self) -> None:
        """The claim of the keys taken since the last acknowledge failed: forget them and
        deliver them again from the last committed offsets."""
        ...


class KeyedClaimStore(Protocol):
    """Postgres claims of kafka mode; leases are taken exactly as ClaimSource.claim takes
    them (same lease-taking SQL). Raise StorageError."""

    async def claim_keys(
        self, owner: str, keys: Sequence[RunKey], lease_seconds: float
    ) -> ClaimBatch:
        """Lease those of ``keys`` that are runnable now (or hold an expired lease)."""
        ...

    async def sweep(
        self, owner: str, limit: int, lease_seconds: float, grace_seconds: float
    ) -> ClaimBatch:
        """SKIP LOCKED: up to ``limit`` runs due longer than ``grace_seconds`` and expired
        leases, oldest first."""
        ...


class RunPublisher(Protocol):
    """Kafka mode's hint channel out: run keys to the topic, keyed by tenant_id."""

    @property
    def healthy(self) -> bool: ...

    async def publish(self, runs: Sequence[tuple[UUID, datetime, UUID]]) -> list[RunKey]:
        """Send ``(run_id, scheduled_for, tenant_id)`` of many runs in one batch; returns
        the keys the broker acknowledged (acks=all). Raises BrokerError when the broker
        cannot be reached; nothing is then known to be published."""
        ...


class OutboxStore(Protocol):
    """job_run.published_at as an outbox (Postgres). Raises StorageError."""

    async def publish_due(
        self,
        limit: int,
        send: Callable[[Sequence[tuple[UUID, datetime, UUID]]], Awaitable[Sequence[RunKey]]],
    ) -> int:
        """In ONE transaction: lock up to ``limit`` due, unpublished, runnable runs (SKIP
        LOCKED), ``await send(runs)`` and mark published only the keys it returns. If
        ``send`` raises, the transaction rolls back and the exception propagates.
        Returns how many were marked."""
        ...

    async def seconds_until_unpublished_due(self) -> float | None:
        """Seconds until the earliest unpublished runnable run is due, None if none."""
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

    def set_partitions_ahead(self, months: int) -> None: ...
    def set_broker_up(self, up: bool) -> None:
        """Kafka mode: whether this replica reaches the broker (scheduler_kafka_broker_up)."""
        ...


# -- tenant API (issue 5): tokens, schedules, run history --
# Every method takes the tenant id and confines itself to that tenant's rows: another
# tenant's object is indistinguishable from a missing one (NotFound), never a 403.


class TokenVerifier(Protocol):
    async def tenant_for_token(self, token: str) -> UUID | None:
        """The tenant owning ``token`` (compared in constant time), or None."""
        ...


class ScheduleStore(Protocol):
    """Schedules as tenants edit them. Every fire-time computation uses the database
    clock read inside the writing transaction. Raises NotFound for a missing, deleted or
    foreign schedule and StorageError when the database fails."""

    async def limits_and_now(
        self, tenant_id: UUID, defaults: TenantLimits
    ) -> tuple[TenantLimits, datetime]:
        """The tenant's effective limits (its own columns over ``defaults``) and ``now()``."""
        ...

    async def create(
        self, tenant_id: UUID, spec: ScheduleSpec, *, paused: bool, signing_secret: str,
        max_schedules: int,
    ) -> ScheduleRecord:
        """Insert a validated schedule with its first ``next_fire_at``; LimitExceeded
        ("max_schedules") when the tenant already has ``max_schedules`` live ones."""
        ...

    async def db_now(self) -> datetime:
        """Postgres ``now()`` (previews count from it)."""
        ...

    async def get(self, tenant_id: UUID, schedule_id: UUID) -> ScheduleRecord: ...

    async def list(
        self, tenant_id: UUID, *, after: UUID | None, limit: int
    ) -> Sequence[ScheduleRecord]:
        """Live schedules ordered by id, strictly after ``after`` (keyset)."""
        ...

    async def update(
        self, tenant_id: UUID, schedule_id: UUID, revise: Callable[[ScheduleSpec], ScheduleSpec]
    ) -> ScheduleRecord:
        """Lock the row, apply ``revise`` (pure; may raise a domain error, which rolls
        back), recompute ``next_fire_at`` if the timing changed, write."""
        ...

    async def delete(self, tenant_id: UUID, schedule_id: UUID) -> int:
        """Soft-delete; cancels the schedule's pending/retrying runs. Running ones finish
        the request in flight (recorded) and then end cancelled: no attempt starts after
        the delete. Returns how many runs were cancelled or so marked. History stays
        readable."""
        ...

    async def set_paused(self, tenant_id: UUID, schedule_id: UUID, paused: bool) -> ScheduleRecord:
        """Pause or resume. Resuming keeps ``next_fire_at`` so the planner's misfire
        policy decides what happens to the occurrences missed while paused."""
        ...

    async def trigger(self, tenant_id: UUID, schedule_id: UUID) -> RunView:
        """A manual run due now, at an instant no cron occurrence can take."""
        ...

    async def rotate_secret(
        self, tenant_id: UUID, schedule_id: UUID, new_secret: str, overlap_seconds: int
    ) -> ScheduleRecord:
        """Install ``new_secret``; the old one keeps signing for ``overlap_seconds``."""
        ...


class RunHistory(Protocol):
    """The tenant-facing run history (reads only)."""

    async def list(self, tenant_id: UUID, query: RunQuery) -> Sequence[RunView]: ...

    async def get(self, tenant_id: UUID, run_id: UUID) -> RunDetail:
        """The run and its attempts (oldest first); NotFound if not this tenant's."""
        ...


# -- executor: circuit breaker store (stage 2) --


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


class MaintenanceStore(Protocol):
    """Partition upkeep and the fleet-wide gauges every replica reports."""

    async def maintain_partitions(
        self, months_ahead: int, retention_months: int
    ) -> tuple[int, list[str]]:
        """Create run-history partitions ``months_ahead`` months past this one and detach +
        drop those older than ``retention_months`` (this month counts as one), under an
        advisory lock so one replica does it at a time. Returns (created, dropped names);
        (0, []) when another replica holds the lock. Raises StorageError."""
        ...

    async def due_backlog(self) -> int:
        """Runs due and not terminal (scheduler_runs_due_backlog)."""
        ...

    async def db_now(self) -> datetime:
        """Postgres ``now()``, for the clock-skew gauge."""
        ...

    async def partition_months_ahead(self) -> int:
        """Whole months after the current one (UTC) whose run partitions exist, counted
        without a gap; -1 when even the current month has none
        (scheduler_partitions_ahead_months). Raises StorageError."""
        ...
