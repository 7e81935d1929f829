"""The tables the in-memory stores share, and the clock that plays Postgres ``now()``."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from cronwire.domain.breaker import BreakerState
from cronwire.domain.calendar_specs import CalendarRecord
from cronwire.domain.errors import StorageError
from cronwire.domain.model import (
    AttemptRecord,
    OverlapPolicy,
    RetryPolicy,
    RunStatus,
    ScheduleStatus,
    SkipReason,
    Target,
    Trigger,
    idempotency_key_for,
    run_id_for,
)
from cronwire.domain.schedules import ScheduleSpec
from cronwire.domain.volume import OPEN_STATUSES, OpenRuns

RUNNABLE = frozenset({RunStatus.PENDING, RunStatus.RETRYING})


class MemoryClock:
    """The fake database's ``now()``; also a :class:`cronwire.ports.Clock`.

    It follows real time from ``start`` (default: now) unless ``frozen``; ``advance`` moves
    it forward, so a test expires a lease or makes a retry due without sleeping."""

    def __init__(self, start: datetime | None = None, *, frozen: bool = False) -> None:
        self._start = start or datetime.now(UTC)
        self._origin = time.monotonic()
        self._offset = 0.0
        self._frozen = frozen

    def monotonic(self) -> float:
        elapsed = 0.0 if self._frozen else time.monotonic() - self._origin
        return elapsed + self._offset

    def now(self) -> datetime:
        return self._start + timedelta(seconds=self.monotonic())

    def advance(self, seconds: float) -> None:
        self._offset += seconds


@dataclass(slots=True)
class MemoryRun:
    """One ``job_run`` row."""

    id: uuid.UUID
    tenant_id: uuid.UUID
    schedule_id: uuid.UUID
    scheduled_for: datetime
    idempotency_key: str
    fire_after: datetime
    trigger: Trigger = Trigger.SCHEDULE
    status: RunStatus = RunStatus.PENDING
    attempt_count: int = 0
    claimed_by: str | None = None
    claim_expires_at: datetime | None = None
    lease_generation: int = 0
    attempt_started: bool = False
    cancel_requested: bool = False
    first_attempt_at: datetime | None = None
    finished_at: datetime | None = None
    last_status_code: int | None = None
    last_error: str | None = None
    published_at: datetime | None = None
    skip_reason: SkipReason | None = None
    overlap_policy: OverlapPolicy | None = None  # None: 'allow', never gated
    replay_of: uuid.UUID | None = None
    replay_of_scheduled_for: datetime | None = None
    replayed_by: uuid.UUID | None = None
    flow_key: str | None = None  # the schedule's flow-control key when the run was written
    flow_slots: int = 0  # the flow_control rows the lease holds a slot of (flow_gate)
    version: int = 0  # bumped by every write (Postgres: xmin)

    @property
    def key(self) -> tuple[uuid.UUID, datetime]:
        return (self.id, self.scheduled_for)

    def lease_free(self, now: datetime) -> bool:
        return self.claim_expires_at is None or self.claim_expires_at < now


@dataclass(slots=True)
class MemorySchedule:
    """One ``schedule`` row."""

    id: uuid.UUID
    tenant_id: uuid.UUID
    spec: ScheduleSpec
    signing_secret: str
    created_at: datetime
    updated_at: datetime
    status: ScheduleStatus = ScheduleStatus.ACTIVE
    next_fire_at: datetime | None = None
    last_fire_at: datetime | None = None
    previous_signing_secret: str | None = None
    previous_secret_expires_at: datetime | None = None
    runs_planned: int = 0
    consecutive_failures: int = 0
    paused_reason: str | None = None
    paused_at: datetime | None = None
    resumed_at: datetime | None = None  # schedule.resumed_at (migration 0031)
    # The overlap gate's holder (schedule.overlap_run, overlap_run_at).
    overlap_run: tuple[uuid.UUID, datetime] | None = None
    version: int = 1
    # schedule_revision: (version, at, changes, the definition) of every version
    revisions: list[tuple[int, datetime, dict[str, Any], ScheduleSpec]] = field(
        default_factory=list)

    @property
    def live(self) -> bool:
        return self.status is not ScheduleStatus.DELETED

    def signing_secrets(self, now: datetime) -> tuple[str, ...]:
        previous = self.previous_signing_secret
        if previous and self.previous_secret_expires_at and self.previous_secret_expires_at > now:
            return (self.signing_secret, previous)
        return (self.signing_secret,)


@dataclass(slots=True)
class FlowRow:
    """One ``flow_control`` row (flow_gate.py reads and writes it)."""

    max_concurrency: int | None = None
    rate_per_second: float | None = None
    burst: int | None = None
    in_flight: int = 0
    tokens: float = 0.0
    tokens_at: datetime | None = None
    held_until: datetime | None = None
    refused_at: datetime | None = None  # when it last held a run back (the waiting gauge's)


@dataclass(slots=True)
class MemoryTenant:
    id: uuid.UUID
    name: str
    max_schedules: int | None = None
    min_interval_seconds: int | None = None
    max_body_bytes: int | None = None
    max_headers: int | None = None
    max_pending_runs: int | None = None
    max_concurrency: int | None = None


@dataclass
class MemoryDatabase:
    """Tenants, schedules, runs, attempts and breakers, with Postgres's constraints where
    the stores rely on them (``UNIQUE (schedule_id, scheduled_for)``, the attempt
    evidence's primary key and its 1 KiB excerpt check)."""

    clock: MemoryClock = field(default_factory=MemoryClock)
    tenants: dict[uuid.UUID, MemoryTenant] = field(default_factory=dict)
    schedules: dict[uuid.UUID, MemorySchedule] = field(default_factory=dict)
    runs: dict[tuple[uuid.UUID, datetime], MemoryRun] = field(default_factory=dict)
    # (run_id, attempt, scheduled_for) -> (evidence, claimed_by)
    attempts: dict[tuple[uuid.UUID, int, datetime], tuple[AttemptRecord, str]] = field(
        default_factory=dict
    )
    breakers: dict[tuple[uuid.UUID, str], BreakerState] = field(default_factory=dict)
    overflow: dict[str, datetime] = field(default_factory=dict)  # kafka mode: owner -> until
    flow: dict[tuple[uuid.UUID, str], FlowRow] = field(default_factory=dict)  # flow_control
    calendars: dict[uuid.UUID, CalendarRecord] = field(default_factory=dict)  # calendar
    _occurrences: set[tuple[uuid.UUID, datetime]] = field(default_factory=set)

    def now(self) -> datetime:
        return self.clock.now()

    def open_runs(self, tenant_id: uuid.UUID, default_limit: int) -> OpenRuns:
        """tenant_open_runs: the tenant's runs not yet ended, counted up to its limit
        (one event loop, no await inside a write: the memory stores need no lock)."""
        tenant = self.tenants.get(tenant_id)
        own = tenant.max_pending_runs if tenant is not None else None
        limit = own if own is not None else default_limit
        counted = sum(1 for r in self.runs.values()
                      if r.tenant_id == tenant_id and r.status.value in OPEN_STATUSES)
        return OpenRuns(counted=min(counted, limit), limit=limit, own=own is not None)

    # -- seeding (what the planner and the API would write) ---------------------------

    def add_tenant(self, name: str = "tenant", tenant_id: uuid.UUID | None = None) -> uuid.UUID:
        tenant = MemoryTenant(tenant_id or uuid.uuid4(), name)
        self.tenants[tenant.id] = tenant
        return tenant.id

    def add_schedule(
        self,
        tenant_id: uuid.UUID,
        url: str,
        *,
        retry: RetryPolicy | None = None,
        signing_secret: str = "whsec_" + "M" * 32,
        previous_secret: str | None = None,
        spec: ScheduleSpec | None = None,
        next_fire_at: datetime | None = None,
    ) -> MemorySchedule:
        """A schedule as tests seed it (``next_fire_at`` None: the planner leaves it be)."""
        now = self.now()
        spec = spec or ScheduleSpec(
            name="seeded", cron="* * * * *", timezone="UTC", target=Target(url=url),
            retry=retry or RetryPolicy(),
        )
        schedule = MemorySchedule(
            id=uuid.uuid4(), tenant_id=tenant_id, spec=spec, signing_secret=signing_secret,
            created_at=now, updated_at=now, next_fire_at=next_fire_at,
            previous_signing_secret=previous_secret,
            previous_secret_expires_at=now + timedelta(days=1) if previous_secret else None,
        )
        self.schedules[schedule.id] = schedule
        return schedule

    def insert_run(
        self,
        schedule_id: uuid.UUID,
        scheduled_for: datetime,
        *,
        fire_after: datetime | None = None,
        status: RunStatus = RunStatus.PENDING,
        trigger: Trigger = Trigger.SCHEDULE,
        run_id: uuid.UUID | None = None,
        overlap_policy: OverlapPolicy | None = None,
        skip_reason: SkipReason | None = None,
    ) -> MemoryRun | None:
        """Insert one run; None when its (schedule, occurrence) exists (ON CONFLICT DO
        NOTHING)."""
        if (schedule_id, scheduled_for) in self._occurrences:
            return None
        schedule = self.schedules[schedule_id]
        run_id = run_id or run_id_for(schedule_id, scheduled_for)
        if (run_id, scheduled_for) in self.runs:
            return None
        now = self.now()
        run = MemoryRun(
            id=run_id, tenant_id=schedule.tenant_id, schedule_id=schedule_id,
            scheduled_for=scheduled_for, idempotency_key=idempotency_key_for(run_id),
            fire_after=fire_after or scheduled_for, trigger=trigger, status=status,
            finished_at=now if status.terminal else None, overlap_policy=overlap_policy,
            skip_reason=skip_reason, flow_key=schedule.spec.flow_key,
        )
        self.runs[run.key] = run
        self._occurrences.add((schedule_id, scheduled_for))
        return run

    def delete_run(self, key: tuple[uuid.UUID, datetime]) -> None:
        run = self.runs.pop(key)
        self._occurrences.discard((run.schedule_id, run.scheduled_for))

    def add_due_runs(
        self, schedule_id: uuid.UUID, count: int, *, first: int = 0, due_seconds_ago: float = 1.0
    ) -> list[MemoryRun]:
        """Like cronwire.harness.seeding.seed_due_runs: occurrences 1 ms apart from an hour ago."""
        now = self.now()
        base = now.replace(microsecond=0) - timedelta(hours=1)
        due = now - timedelta(seconds=due_seconds_ago)
        runs = []
        for g in range(first, first + count):
            run = self.insert_run(
                schedule_id, base + timedelta(milliseconds=g), fire_after=due
            )
            if run is not None:
                runs.append(run)
        return runs

    # -- reads the stores share ----------------------------------------------------------

    def find(self, run_id: uuid.UUID, scheduled_for: datetime) -> MemoryRun | None:
        return self.runs.get((run_id, scheduled_for))

    def record_attempt(self, record: AttemptRecord, claimed_by: str) -> None:
        key = (record.run_id, record.attempt, record.scheduled_for)
        self.attempts.setdefault(key, (record, claimed_by))  # ON CONFLICT DO NOTHING


def check_attempt(record: AttemptRecord) -> None:
    """The evidence table's CHECK constraints; a violation fails the whole write."""
    if not 1 <= record.attempt <= 8:
        raise StorageError(f"attempt {record.attempt} out of 1..8")
    if record.duration_ms < 0:
        raise StorageError("negative duration_ms")
    excerpt = record.response_excerpt
    if excerpt is not None and len(excerpt.encode()) > 1024:
        raise StorageError("response_excerpt longer than 1 KiB")
