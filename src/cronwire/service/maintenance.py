"""Small periodic loops every replica runs: partition keeper (with alert-event retention)
and fleet gauges."""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta

from cronwire.ports import Clock, MaintenanceStore, Metrics
from cronwire.service.periodic import every

log = logging.getLogger(__name__)
MONTHS_AHEAD = 2
# Alert events past retention go this many rows per statement, at most this many
# statements per pass (a first pass over years of history catches up over a few hours).
EXPIRY_BATCH = 1000
EXPIRY_MAX_BATCHES = 100


class PartitionKeeper:
    """Creates run-history and audit-log partitions ahead of time and drops expired ones;
    deletes alert events, audit rows and schedule revisions older than the audit
    retention (SCHEDULER_AUDIT_RETENTION_DAYS)."""

    def __init__(self, store: MaintenanceStore, *, retention_months: int, interval_seconds: float,
                 audit_retention_days: int) -> None:
        self._store = store
        self._retention = retention_months
        self._audit_retention_days = audit_retention_days
        self._interval = interval_seconds
        self.passes = 0  # test signal: completed passes
        self.alert_events_deleted = 0  # by the last pass
        self.audit_rows_deleted = 0  # audit rows and schedule revisions, by the last pass

    async def run_once(self) -> tuple[int, list[str]]:
        created, dropped = await self._store.maintain_partitions(MONTHS_AHEAD, self._retention)
        if created or dropped:
            log.info("partitions: created %d, dropped %s", created, dropped or "none")
        self.alert_events_deleted = await self._store.delete_expired_alert_events(
            self._audit_retention_days, EXPIRY_BATCH, EXPIRY_MAX_BATCHES)
        if self.alert_events_deleted:
            log.info("alert events: deleted %d older than %d days", self.alert_events_deleted,
                     self._audit_retention_days)
        audit_created, audit_dropped, self.audit_rows_deleted = \
            await self._store.maintain_audit_log(MONTHS_AHEAD, self._audit_retention_days,
                                                 EXPIRY_BATCH, EXPIRY_MAX_BATCHES)
        if audit_created or audit_dropped or self.audit_rows_deleted:
            log.info("audit log: partitions created %d, dropped %s; %d rows past %d days "
                     "deleted", audit_created, audit_dropped or "none", self.audit_rows_deleted,
                     self._audit_retention_days)
        self.passes += 1
        return created, dropped

    async def run(self, stopping: asyncio.Event) -> None:
        await every(self._interval, stopping, self.run_once, "partition maintenance")


class FleetGauges:
    """Samples the due backlog, this replica's clock skew against Postgres and how many
    months of partitions lie ahead. The loop samples every few seconds and the gauges hold
    the last sample, so a scrape never queries the database (any scrape rate is free)."""

    def __init__(self, store: MaintenanceStore, metrics: Metrics, clock: Clock, *, interval_seconds: float) -> None:
        self._store = store
        self._metrics = metrics
        self._clock = clock
        self._interval = interval_seconds

    async def sample(self) -> tuple[int, float]:
        backlog = await self._store.due_backlog()
        before = self._clock.now()
        db_now = await self._store.db_now()
        after = self._clock.now()
        # Compare against the midpoint of the round trip so network latency is not skew.
        skew = ((before + (after - before) / 2) - db_now) / timedelta(seconds=1)
        self._metrics.set_backlog(backlog)
        self._metrics.set_clock_skew(skew)
        self._metrics.set_partitions_ahead(await self._store.partition_months_ahead())
        self._metrics.set_flow_waiting(await self._store.flow_waiting())
        self._metrics.set_client_certificate_expiry(
            await self._store.earliest_client_certificate_expiry())
        return backlog, skew

    async def run(self, stopping: asyncio.Event) -> None:
        await every(self._interval, stopping, self.sample, "gauge sampling")
