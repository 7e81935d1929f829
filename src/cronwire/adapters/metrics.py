"""Prometheus implementation of the Metrics port (one registry per process/container)."""

from __future__ import annotations

import math
from datetime import datetime

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

LAG_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300, 900, 3600)
DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
STATS_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5)
ALERT_OUTCOMES = ("delivered", "retrying", "failed", "undelivered")


class PrometheusMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self._backlog = Gauge(
            "scheduler_runs_due_backlog", "Runs due and not yet terminal", registry=r
        )
        self._skew = Gauge(
            "scheduler_clock_skew_seconds", "Replica clock minus Postgres now()", registry=r
        )
        self._lag = Histogram(
            "scheduler_fire_lag_seconds", "First attempt start minus scheduled_for",
            buckets=LAG_BUCKETS, registry=r,
        )
        self._runs = Counter(
            "scheduler_runs_total", "Runs finished, by outcome", ["outcome"], registry=r
        )
        self._claims = Counter(
            "scheduler_claims_total", "Runs claimed, by claim source", ["source"], registry=r
        )
        self._lease_lost = Counter(
            "scheduler_lease_lost_total", "Deliveries abandoned because the lease was lost",
            registry=r,
        )
        self._sent_after_deadline = Counter(
            "scheduler_sends_after_deadline_total",
            "Requests written after their send deadline (the process was stopped as it "
            "wrote): each may also be delivered by the replica that took its lease",
            registry=r,
        )
        self._breakers = Gauge(
            "scheduler_breaker_open", "Targets whose circuit breaker is open", registry=r
        )
        # No tenant label (ADR 0040): one series however many tenants and keys there are.
        self._flow_waiting = Gauge(
            "scheduler_flow_control_waiting",
            "Runs due that a flow-control limit holds back (concurrency, rate, Retry-After)",
            registry=r,
        )
        self._duration = Histogram(
            "scheduler_delivery_duration_seconds", "One delivery attempt, end to end",
            buckets=DURATION_BUCKETS, registry=r,
        )
        self._runs_by_outcome: dict[str, Counter] = {}
        self._broker_up: Gauge | None = None  # kafka mode only: created on first report
        self._skipped: Counter | None = None  # kafka mode only: created on first skip
        self._tick = Histogram(
            "scheduler_planner_tick_seconds", "One planner transaction", registry=r
        )
        self._partitions_ahead = Gauge(
            "scheduler_partitions_ahead_months",
            "Months after the current one with run partitions in place (-1: current missing)",
            registry=r,
        )
        self._history_reads = Counter(
            "scheduler_history_reads_total",
            "Run-history reads by the server that answered (standby: SCHEDULER_DATABASE_READ_URL)",
            ["server"], registry=r,
        )
        # No tenant label (ADR 0040): the fleet's earliest expiry, one series; the runbook's
        # query names the schedules. +Inf while no schedule has a client certificate.
        self._client_certificate_expiry = Gauge(
            "scheduler_client_certificate_expiry_timestamp_seconds",
            "Unix time of the earliest not_after of any schedule's client certificate (mTLS)",
            registry=r,
        )
        self._client_certificate_expiry.set(math.inf)
        self._readiness = Gauge(
            "scheduler_readiness", "Last /readyz outcome per check (1 passing, 0 failing)",
            ["check"], registry=r,
        )
        # Alert deliveries by what the attempt ended in, and the stats queries.
        self._alerts = Counter(
            "scheduler_alert_deliveries_total",
            "Alert delivery attempts, by outcome (delivered, retrying, failed, undelivered)",
            ["outcome"], registry=r,
        )
        for outcome in ALERT_OUTCOMES:  # exported at zero before the first alert
            self._alerts.labels(outcome=outcome)
        self._stats = Histogram(
            "scheduler_stats_query_seconds", "One GET /v1/schedules/{id}/stats, its queries",
            buckets=STATS_BUCKETS, registry=r,
        )

    def claims(self, source: str, count: int) -> None:
        self._claims.labels(source=source).inc(count)

    def run_finished(self, outcome: str, count: int = 1) -> None:
        # The labelled child is looked up once per outcome: labels() validates and locks
        # on every call (~1% of an executor's CPU when it ran once per run).
        child = self._runs_by_outcome.get(outcome)
        if child is None:
            child = self._runs_by_outcome[outcome] = self._runs.labels(outcome=outcome)
        child.inc(count)

    def lease_lost(self, count: int = 1) -> None:
        self._lease_lost.inc(count)

    def sent_after_deadline(self) -> None:
        self._sent_after_deadline.inc()

    def fire_lag(self, seconds: float) -> None:
        self._lag.observe(seconds)

    def delivery_duration(self, seconds: float) -> None:
        self._duration.observe(seconds)

    def planner_tick(self, seconds: float) -> None:
        self._tick.observe(seconds)

    def set_backlog(self, runs: int) -> None:
        self._backlog.set(runs)

    def set_clock_skew(self, seconds: float) -> None:
        self._skew.set(seconds)

    def set_breakers_open(self, targets: int) -> None:
        self._breakers.set(targets)

    def set_readiness(self, checks: dict[str, bool]) -> None:
        """The outcome of the last /readyz, one series per check (alertable readiness)."""
        for check, ok in checks.items():
            self._readiness.labels(check=check).set(1 if ok else 0)

    def set_client_certificate_expiry(self, not_after: datetime | None) -> None:
        self._client_certificate_expiry.set(
            math.inf if not_after is None else not_after.timestamp())

    def set_flow_waiting(self, runs: int) -> None:
        self._flow_waiting.set(runs)

    def set_partitions_ahead(self, months: int) -> None:
        self._partitions_ahead.set(months)

    def history_read(self, server: str) -> None:
        """A history read answered by ``server`` ("standby" or "primary")."""
        self._history_reads.labels(server=server).inc()

    def set_broker_up(self, up: bool) -> None:
        if self._broker_up is None:
            self._broker_up = Gauge(
                "scheduler_kafka_broker_up",
                "Kafka mode: 1 while this replica reaches the broker, 0 while only the "
                "sweeper claims", registry=self.registry,
            )
        self._broker_up.set(1 if up else 0)

    def kafka_message_skipped(self, reason: str) -> None:
        """A run-key message no replica can read (malformed, unknown version, out of
        range): skipped and its offset committed (ADR 0027)."""
        if self._skipped is None:
            self._skipped = Counter(
                "scheduler_kafka_messages_skipped",
                "Kafka mode: run-key messages skipped because they cannot be read, by reason",
                ["reason"], registry=self.registry,
            )
        self._skipped.labels(reason=reason).inc()

    def alert_delivered(self, outcome: str) -> None:
        self._alerts.labels(outcome=outcome).inc()

    def stats_query(self, seconds: float) -> None:
        self._stats.observe(seconds)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)
