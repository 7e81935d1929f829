"""The observability ports: tracing, per-schedule stats, explain, alerts. Re-exported by
:mod:`cronwire.ports`, where services import them from.

The Tracer is called from the executor's and the planner's hot paths, so its contract
is shaped for a cost of one attribute read when tracing is off: callers test
``tracer.enabled`` and call nothing else unless it is true. Spans are recorded after the
fact, with the instants the caller measured, so no span object lives across an ``await``.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol
from uuid import UUID

from cronwire.domain.access import Change
from cronwire.domain.alerts import (
    AlertDestination,
    AlertEvent,
    AlertResolution,
    ClaimedAlert,
    EventAttempt,
)
from cronwire.domain.delivery import DeliveryRequest, DeliveryResult
from cronwire.domain.keyset import HistoryPosition
from cronwire.domain.model import ClaimedRun, RunStatus
from cronwire.domain.stats import ScheduleStats


class Tracer(Protocol):
    """OpenTelemetry spans of the run's life (ADR 0035). Never raises: a tracing failure
    must not fail a delivery (the SDK logs and drops)."""

    enabled: bool  # False: nothing is exported and no traceparent is sent

    def traceparent(self, run: ClaimedRun) -> str:
        """The W3C ``traceparent`` for the attempt ``run`` is about to make: the run's
        trace, the attempt's span id, sampled or not as this run's trace is."""
        ...

    def planner_tick(self, start_ns: int, end_ns: int, *, schedules: int, runs: int,
                     failed: bool, planned: Sequence[UUID]) -> None:
        """One planner transaction; ``planned``: ids of the runs it decided (linked)."""
        ...

    def claim(self, start_ns: int, end_ns: int, *, source: str,
              runs: Sequence[ClaimedRun]) -> None:
        """One claim statement and the runs it leased (linked)."""
        ...

    def attempt(self, run: ClaimedRun, request: DeliveryRequest,
                result: DeliveryResult) -> None:
        """The HTTP client span of one attempt, child of the run's root, with the span id
        :meth:`traceparent` announced."""
        ...

    def result_write(self, start_ns: int, end_ns: int,
                     written: Sequence[tuple[ClaimedRun, RunStatus | None]]) -> None:
        """One batched terminal/retry write (``None``: that run's write did not land);
        a run that ended here gets its root span (from ``scheduled_for`` to now)."""
        ...

    def shutdown(self) -> None:
        """Export what is buffered and stop; idempotent."""
        ...


class NoTracer:
    """The Tracer when tracing is not configured (the composition root's default, and the
    services' when none is given): ``enabled`` is False, so callers call nothing else."""

    enabled = False

    def traceparent(self, run: ClaimedRun) -> str:
        raise RuntimeError("tracing is off: callers check Tracer.enabled first")

    def planner_tick(self, start_ns: int, end_ns: int, *, schedules: int, runs: int,
                     failed: bool, planned: Sequence[UUID]) -> None:
        return None

    def claim(self, start_ns: int, end_ns: int, *, source: str,
              runs: Sequence[ClaimedRun]) -> None:
        return None

    def attempt(self, run: ClaimedRun, request: DeliveryRequest,
                result: DeliveryResult) -> None:
        return None

    def result_write(self, start_ns: int, end_ns: int,
                     written: Sequence[tuple[ClaimedRun, RunStatus | None]]) -> None:
        return None

    def shutdown(self) -> None:
        return None


TRACING_OFF: Tracer = NoTracer()

__all__ = ["TRACING_OFF", "AlertOutbox", "AlertStore", "NoTracer", "StatsReader", "Tracer"]


class StatsReader(Protocol):
    """Per-schedule figures over the run history (reads only)."""

    async def schedule_stats(self, tenant_id: UUID, schedule_id: UUID, window: str,
                             window_seconds: int) -> ScheduleStats:
        """Stats of one schedule's runs in the last ``window_seconds`` (database clock).
        The caller has checked that the schedule is the tenant's. Raises StorageError."""
        ...

    async def retained_since(self) -> datetime | None:
        """The oldest instant whose run history is still kept (the oldest partition's
        lower bound); None when there is no history table at all. Raises StorageError."""
        ...


class AlertStore(Protocol):
    """A tenant's alert destination and its event history (the API's side). Every method
    is confined to ``tenant_id``. Raises StorageError."""

    async def set_destination(self, tenant_id: UUID, url: str, events: Sequence[str],
                              signing_secret: str, change: Change = ...) -> AlertDestination:
        """Create or replace the destination (a new secret each time), with its audit row
        (``alerts.update``) in the same transaction."""
        ...

    async def destination(self, tenant_id: UUID) -> AlertDestination | None: ...

    async def list_events(
        self, tenant_id: UUID, *, before: HistoryPosition | None, limit: int
    ) -> Sequence[tuple[AlertEvent, tuple[EventAttempt, ...]]]:
        """Events newest first, keyset on (created_at, id), each with its attempts."""
        ...


class AlertOutbox(Protocol):
    """The dispatcher's side: detect late schedules, claim events, record attempts.
    Raises StorageError."""

    async def check_late(self, horizon_seconds: float) -> int:
        """Flip the late state of every schedule whose lateness changed and insert one
        ``schedule.late`` event per schedule that became late (exactly one across
        replicas checking at once). Returns the events inserted."""
        ...

    async def tell_untold_failing(self) -> int:
        """Insert one ``schedule.failing`` event (with its ``suppressed_flips``) per
        schedule still failing after flap damping kept its last flip to failing unsent,
        once its 60 s window has passed (exactly one across replicas). Returns the events
        inserted."""
        ...

    async def claim(self, owner: str, limit: int, lease_seconds: float,
                    tenant_in_flight: int) -> Sequence[ClaimedAlert]:
        """Lease up to ``limit`` due events (SKIP LOCKED), each as its next attempt, with
        tenants taking turns (oldest tenant first) and no tenant beyond
        ``tenant_in_flight`` live leases across every replica; ends abandoned final
        attempts as failed first."""
        ...

    async def resolve(self, owner: str, resolution: AlertResolution) -> bool:
        """Write one attempt's end and evidence where the lease is still ours; True if it
        landed."""
        ...
