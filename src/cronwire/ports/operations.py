"""What a replica measures and keeps up: the metrics seam and the maintenance store
(partitions, retention, the fleet-wide gauges). Imported through :mod:`cronwire.ports`."""

from __future__ import annotations

from datetime import datetime
from typing import Protocol


class Metrics(Protocol):
    """The Prometheus series of CONTRACT.md, behind a seam so services stay pure."""

    def claims(self, source: str, count: int) -> None: ...

    def run_finished(self, outcome: str, count: int = 1) -> None: ...

    def lease_lost(self, count: int = 1) -> None: ...

    def fire_lag(self, seconds: float) -> None: ...

    def delivery_duration(self, seconds: float) -> None: ...

    def planner_tick(self, seconds: float) -> None: ...

    def set_backlog(self, runs: int) -> None: ...

    def set_clock_skew(self, seconds: float) -> None: ...

    def set_breakers_open(self, targets: int) -> None: ...

    def set_partitions_ahead(self, months: int) -> None: ...

    def set_client_certificate_expiry(self, not_after: datetime | None) -> None:
        """The earliest client certificate expiry of any schedule (None: no certificate)."""

    def set_flow_waiting(self, runs: int) -> None:
        """scheduler_flow_control_waiting: runs due that a flow-control limit holds back."""
        ...

    def set_broker_up(self, up: bool) -> None:
        """Kafka mode: whether this replica reaches the broker (scheduler_kafka_broker_up)."""
        ...

    def alert_delivered(self, outcome: str) -> None:
        """One alert delivery attempt ended: delivered, retrying, failed or undelivered
        (scheduler_alert_deliveries_total{outcome})."""
        ...

    def stats_query(self, seconds: float) -> None:
        """One stats request's queries took this long (scheduler_stats_query_seconds)."""
        ...


# -- executor: circuit breaker store (stage 2) --


class MaintenanceStore(Protocol):
    """Partition upkeep and the fleet-wide gauges every replica reports."""

    async def maintain_partitions(
        self, months_ahead: int, retention_months: int
    ) -> tuple[int, list[str]]:
        """Create run-history partitions for the ``retention_months`` months kept (this
        month counts as one) and ``months_ahead`` months past this one, and detach + drop
        those older than the months kept, under an
        advisory lock so one replica does it at a time. Returns (created, dropped names);
        (0, []) when another replica holds the lock. Raises StorageError."""
        ...

    async def delete_expired_alert_events(self, retention_days: int, batch: int,
                                          max_batches: int) -> int:
        """Delete alert events (with their attempts) created more than ``retention_days``
        days ago, oldest first, ``batch`` rows per statement, at most ``max_batches``
        statements; safe beside other replicas doing the same. Returns the rows deleted.
        Raises StorageError."""
        ...

    async def maintain_audit_log(self, months_ahead: int, retention_days: int, batch: int,
                                 max_batches: int) -> tuple[int, list[str], int]:
        """Audit partitions: this month's and ``months_ahead`` more made, those past
        ``retention_days`` dropped, older rows deleted: (created, dropped, deleted)."""
        ...

    async def due_backlog(self) -> int:
        """Runs due and not terminal (scheduler_runs_due_backlog)."""
        ...

    async def db_now(self) -> datetime:
        """Postgres ``now()``, for the clock-skew gauge."""
        ...

    async def flow_waiting(self) -> int:
        """Runs due whose flow-control key admits nothing now (at its concurrency, out of
        tokens, or held by a Retry-After), across every tenant. Raises StorageError."""
        ...

    async def earliest_client_certificate_expiry(self) -> datetime | None:
        """The earliest client certificate ``not_after`` of live schedules (None: none)."""

    async def partition_months_ahead(self) -> int:
        """Whole months after the current one (UTC) whose run partitions exist, counted
        without a gap; -1 when even the current month has none
        (scheduler_partitions_ahead_months). Raises StorageError."""
        ...
