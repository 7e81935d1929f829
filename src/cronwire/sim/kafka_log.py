"""Kafka mode's broker, in memory: an outbox over the simulated database
(``job_run.published_at``, as PostgresOutboxStore marks it) and a log with one partition
per replica, keyed by tenant. A key the scenario loses is acknowledged and never
delivered (the sweeper must find its run)."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime, timedelta

from cronwire.adapters.memory import MemoryHints, MemoryRun
from cronwire.adapters.memory.database import RUNNABLE
from cronwire.ports import RunKey
from cronwire.sim.database import SimDatabase
from cronwire.sim.faults import Life, park
from cronwire.sim.scenario import LostHint, Scenario
from cronwire.sim.trace import Trace, short

Published = tuple[uuid.UUID, datetime, uuid.UUID]


class MemoryOutbox:
    """The OutboxStore port over a :class:`SimDatabase`."""

    def __init__(self, db: SimDatabase) -> None:
        self._db = db

    async def publish_due(
        self, limit: int, send: Callable[[Sequence[Published]], Awaitable[Sequence[RunKey]]],
        *, max_age_seconds: float | None = None, per_tenant: int | None = None,
    ) -> int:
        now = self._db.now()
        oldest = None if max_age_seconds is None else now - timedelta(seconds=max_age_seconds)
        due = sorted((r for r in self._db.runs.values()
                      if r.status in RUNNABLE and r.published_at is None and r.fire_after <= now
                      and (oldest is None or r.fire_after >= oldest) and r.lease_free(now)),
                     key=lambda r: (r.fire_after, r.id))
        taken: list[MemoryRun] = []
        per: dict[uuid.UUID, int] = {}
        for run in due:
            if per_tenant is not None and per.get(run.tenant_id, 0) >= per_tenant:
                continue
            per[run.tenant_id] = per.get(run.tenant_id, 0) + 1
            taken.append(run)
            if len(taken) >= limit:
                break
        if not taken:
            return 0
        for run in taken:
            run.published_at = now
        try:
            acked = set(await send([(r.id, r.scheduled_for, r.tenant_id) for r in taken]))
        except BaseException:
            for run in taken:
                run.published_at = None
            raise
        for run in taken:
            if run.key not in acked:
                run.published_at = None
        return len(acked)

    async def seconds_until_unpublished_due(self) -> float | None:
        due = [r.fire_after for r in self._db.runs.values()
               if r.status in RUNNABLE and r.published_at is None]
        if not due:
            return None
        return (min(due) - self._db.now()).total_seconds()


class Log:
    """The topic: one partition per replica index, a tenant's keys on one partition."""

    def __init__(self, scenario: Scenario, replicas: int, trace: Trace) -> None:
        self.partitions = [MemoryHints(buffer_limit=200) for _ in range(replicas)]
        self._lost = {item.key for item in scenario.items if isinstance(item, LostHint)}
        self._trace = trace
        self._tenants: dict[uuid.UUID, int] = {}
        self._published = 0

    def partition_of(self, tenant: uuid.UUID) -> MemoryHints:
        index = self._tenants.setdefault(tenant, len(self._tenants) % len(self.partitions))
        return self.partitions[index]

    def append(self, runs: Sequence[Published]) -> list[RunKey]:
        for run_id, scheduled_for, tenant in runs:
            self._published += 1
            if self._published in self._lost:
                self._trace.add("hint-lost", short(run_id))
                continue
            self.partition_of(tenant).deliver([(run_id, scheduled_for)])
        return [(run_id, scheduled_for) for run_id, scheduled_for, _ in runs]


class SimPublisher:
    """The RunPublisher port of one replica incarnation."""

    def __init__(self, log: Log, life: Life) -> None:
        self._log = log
        self._life = life

    @property
    def healthy(self) -> bool:
        return True

    async def publish(self, runs: Sequence[Published]) -> list[RunKey]:
        if not self._life.alive:
            await park()
        return self._log.append(runs)
