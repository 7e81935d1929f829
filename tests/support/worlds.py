"""One face over the run tables of Postgres and of the in-memory fake, so one contract
suite drives both: seed runs, bend a row the way a crash or a stall would leave it, and
read rows back. Times read back are on each store's own clock (Postgres ``now()``, the
fake's :class:`MemoryClock`)."""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

import asyncpg
import pytest

from cronwire.adapters.memory import (
    MemoryBreakerStore,
    MemoryCalendarStore,
    MemoryClaimSource,
    MemoryClock,
    MemoryDatabase,
    MemoryKeyedClaims,
    MemoryPlannerStore,
    MemoryRun,
    MemoryRunCommands,
    MemoryRunStore,
    MemoryScheduleStore,
)
from cronwire.adapters.memory.flow_gate import sync_keys
from cronwire.adapters.postgres.breaker_store import PostgresBreakerStore
from cronwire.adapters.postgres.calendar_store import PostgresCalendarStore
from cronwire.adapters.postgres.claim_source import PostgresClaimSource
from cronwire.adapters.postgres.keyed_claims import PostgresKeyedClaims
from cronwire.adapters.postgres.planner_store import PostgresPlannerStore
from cronwire.adapters.postgres.run_commands import PostgresRunCommands
from cronwire.adapters.postgres.run_store import PostgresRunStore
from cronwire.adapters.postgres.schedule_store import PostgresScheduleStore
from cronwire.domain.flow_control import FlowControl, default_burst
from cronwire.domain.model import OverlapPolicy, RetryPolicy, RunStatus
from cronwire.harness.seeding import (
    SeededSchedule,
    seed_due_runs,
    seed_flow_control,
    seed_schedule,
    seed_tenant,
)
from cronwire.ports import (
    BreakerStore,
    CalendarStore,
    ClaimSource,
    KeyedClaimStore,
    PlannerStore,
    RunCommands,
    RunStore,
    ScheduleStore,
)
from tests.support.secrets import secret_box

URL = "http://127.0.0.1:9/hook"
STORES = ["postgres", "memory"]


@dataclass(frozen=True)
class ScheduleFacts:
    status: str
    paused_reason: str | None
    consecutive_failures: int
    overlap_run: uuid.UUID | None  # the run holding the overlap gate


@dataclass(frozen=True)
class Row:
    status: str
    claimed_by: str | None
    attempt_count: int
    lease_left: float | None  # seconds until claim_expires_at
    due_in: float  # seconds until fire_after
    first_attempt_at: datetime | None
    finished_at: datetime | None
    last_status_code: int | None
    last_error: str | None


class World(Protocol):
    claims: ClaimSource
    runs: RunStore
    schedules: ScheduleStore
    breakers: BreakerStore
    keyed: KeyedClaimStore
    planner: PlannerStore
    commands: RunCommands
    calendars: CalendarStore

    async def seed(
        self, count: int, *, retry: dict[str, float] | None = None, first: int = 0,
        due_seconds_ago: float = 1.0, previous_secret: str | None = None,
        schedule: SeededSchedule | None = None,
    ) -> SeededSchedule: ...

    async def expire(self, run_id: uuid.UUID) -> None:
        """The lease ran out (its owner stalled or died)."""

    async def pass_time(self, seconds: float) -> None:
        """The database's clock moves on ``seconds`` (the fake's is moved; Postgres's is
        waited for)."""

    async def set_all(self, **columns: Any) -> None:
        """Overwrite columns of every run (status, attempt_count, claimed_by,
        attempt_started) and, with ``expired=True``, expire their leases."""

    async def set_claimed_by(self, run_id: uuid.UUID, owner: str) -> None: ...

    async def row(self, run_id: uuid.UUID) -> Row: ...

    async def rows(self) -> list[Row]: ...

    async def attempts(self) -> set[tuple[uuid.UUID, int, str]]:
        """(run_id, attempt, claimed_by) of every evidence row."""

    async def version(self, run_id: uuid.UUID) -> object:
        """Changes whenever anything writes the row."""

    async def db_now(self) -> datetime: ...

    async def count(self, status: str) -> int: ...

    async def pending_of(self, schedule_id: uuid.UUID) -> list[datetime]:
        """Occurrences of the schedule written and still pending, oldest first."""

    async def gate(self, schedule_id: uuid.UUID, policy: str | None,
                   pause_after_failures: int | None = None) -> None:
        """Put the schedule and every run of it under an overlap policy (None: allow), and
        set its pause_after_failures, as the planner would have written them."""

    async def skip_reason(self, run_id: uuid.UUID) -> str | None: ...

    async def keys(self) -> list[tuple[uuid.UUID, datetime]]:
        """(id, scheduled_for) of every run, oldest occurrence first."""

    async def schedule_facts(self, schedule_id: uuid.UUID) -> ScheduleFacts: ...

    async def flow(self, schedule: SeededSchedule, key: str, *,
                   max_concurrency: int | None = None, rate_per_second: float | None = None,
                   burst: int | None = None) -> None:
        """Give the schedule and its runnable runs the flow-control ``key`` with these
        limits (harness.seeding.seed_flow_control)."""

    async def flow_row(self, tenant_id: uuid.UUID, key: str) -> tuple[int, bool]:
        """The key's (in_flight, held now)."""


def _retry(doc: dict[str, float] | None) -> RetryPolicy:
    doc = doc or {"max_attempts": 3, "initial_backoff_seconds": 0.05, "max_backoff_seconds": 0.2}
    return RetryPolicy(int(doc["max_attempts"]), float(doc["initial_backoff_seconds"]),
                       float(doc["max_backoff_seconds"]))


class MemoryWorld:
    def __init__(self, db: MemoryDatabase | None = None) -> None:
        self.db = db or MemoryDatabase(clock=MemoryClock(frozen=True))
        self.claims: ClaimSource = MemoryClaimSource(self.db)
        self.runs: RunStore = MemoryRunStore(self.db)
        self.schedules: ScheduleStore = MemoryScheduleStore(self.db)
        self.breakers: BreakerStore = MemoryBreakerStore(self.db)
        self.keyed: KeyedClaimStore = MemoryKeyedClaims(self.db)
        self.planner: PlannerStore = MemoryPlannerStore(self.db)
        self.commands: RunCommands = MemoryRunCommands(self.db)
        self.calendars: CalendarStore = MemoryCalendarStore(self.db)

    async def seed(
        self, count: int, *, retry: dict[str, float] | None = None, first: int = 0,
        due_seconds_ago: float = 1.0, previous_secret: str | None = None,
        schedule: SeededSchedule | None = None,
    ) -> SeededSchedule:
        if schedule is None:
            made = self.db.add_schedule(self.db.add_tenant(), URL, retry=_retry(retry),
                                        previous_secret=previous_secret)
            schedule = SeededSchedule(made.id, made.tenant_id, URL, made.signing_secret)
        self.db.add_due_runs(schedule.id, count, first=first, due_seconds_ago=due_seconds_ago)
        return schedule

    def _run(self, run_id: uuid.UUID) -> MemoryRun:
        [run] = [r for r in self.db.runs.values() if r.id == run_id]
        return run

    async def expire(self, run_id: uuid.UUID) -> None:
        run = self._run(run_id)
        run.claim_expires_at = self.db.now() - timedelta(milliseconds=1)
        run.version += 1

    async def pass_time(self, seconds: float) -> None:
        self.db.clock.advance(seconds)

    async def set_all(self, **columns: Any) -> None:
        expired = columns.pop("expired", False)
        for run in self.db.runs.values():
            for name, value in columns.items():
                setattr(run, name, RunStatus(value) if name == "status" else value)
            if expired:
                run.claim_expires_at = self.db.now() - timedelta(seconds=1)
            run.version += 1

    async def set_claimed_by(self, run_id: uuid.UUID, owner: str) -> None:
        run = self._run(run_id)
        run.claimed_by = owner
        run.version += 1

    def _row(self, run: MemoryRun) -> Row:
        now = self.db.now()
        return Row(
            status=str(run.status), claimed_by=run.claimed_by, attempt_count=run.attempt_count,
            lease_left=None if run.claim_expires_at is None
            else (run.claim_expires_at - now).total_seconds(),
            due_in=(run.fire_after - now).total_seconds(),
            first_attempt_at=run.first_attempt_at, finished_at=run.finished_at,
            last_status_code=run.last_status_code, last_error=run.last_error,
        )

    async def row(self, run_id: uuid.UUID) -> Row:
        return self._row(self._run(run_id))

    async def rows(self) -> list[Row]:
        return [self._row(r) for r in self.db.runs.values()]

    async def attempts(self) -> set[tuple[uuid.UUID, int, str]]:
        return {(rec.run_id, rec.attempt, by) for rec, by in self.db.attempts.values()}

    async def version(self, run_id: uuid.UUID) -> object:
        return self._run(run_id).version

    async def db_now(self) -> datetime:
        return self.db.now()

    async def pending_of(self, schedule_id: uuid.UUID) -> list[datetime]:
        return sorted(run.scheduled_for for run in self.db.runs.values()
                      if run.schedule_id == schedule_id and run.status is RunStatus.PENDING)

    async def count(self, status: str) -> int:
        return sum(1 for r in self.db.runs.values() if r.status == status)

    async def gate(self, schedule_id: uuid.UUID, policy: str | None,
                   pause_after_failures: int | None = None) -> None:
        schedule = self.db.schedules[schedule_id]
        schedule.spec = dataclasses.replace(
            schedule.spec, overlap_policy=OverlapPolicy(policy or "allow"),
            pause_after_failures=pause_after_failures)
        for run in self.db.runs.values():
            if run.schedule_id == schedule_id:
                run.overlap_policy = OverlapPolicy(policy) if policy else None

    async def skip_reason(self, run_id: uuid.UUID) -> str | None:
        reason = self._run(run_id).skip_reason
        return str(reason) if reason else None

    async def keys(self) -> list[tuple[uuid.UUID, datetime]]:
        return sorted(((r.id, r.scheduled_for) for r in self.db.runs.values()),
                      key=lambda key: key[1])

    async def flow(self, schedule: SeededSchedule, key: str, *,
                   max_concurrency: int | None = None, rate_per_second: float | None = None,
                   burst: int | None = None) -> None:
        if rate_per_second is not None and burst is None:
            burst = default_burst(rate_per_second)
        made = self.db.schedules[schedule.id]
        made.spec = dataclasses.replace(made.spec, flow_control=FlowControl(
            key, max_concurrency, rate_per_second, burst))
        for run in self.db.runs.values():
            if run.schedule_id == schedule.id and run.status in (RunStatus.PENDING,
                                                                 RunStatus.RETRYING):
                run.flow_key = key
        sync_keys(self.db, schedule.tenant_id, [key])

    async def flow_row(self, tenant_id: uuid.UUID, key: str) -> tuple[int, bool]:
        row = self.db.flow[(tenant_id, key)]
        held = row.held_until is not None and row.held_until > self.db.now()
        return row.in_flight, held

    async def schedule_facts(self, schedule_id: uuid.UUID) -> ScheduleFacts:
        s = self.db.schedules[schedule_id]
        return ScheduleFacts(str(s.status), s.paused_reason, s.consecutive_failures,
                             s.overlap_run[0] if s.overlap_run else None)


ROW = """SELECT status, claimed_by, attempt_count,
                extract(epoch FROM claim_expires_at - now())::float8 AS lease_left,
                extract(epoch FROM fire_after - now())::float8 AS due_in, first_attempt_at,
                finished_at, last_status_code, last_error
           FROM job_run"""


class PostgresWorld:
    def __init__(self, pool: asyncpg.Pool, claims: ClaimSource | None = None) -> None:
        self.pool = pool
        self.claims: ClaimSource = claims or PostgresClaimSource(pool, secret_box(pool))
        self.runs: RunStore = PostgresRunStore(pool)
        self.schedules: ScheduleStore = PostgresScheduleStore(pool, secret_box(pool))
        self.breakers: BreakerStore = PostgresBreakerStore(pool)
        self.keyed: KeyedClaimStore = PostgresKeyedClaims(pool, secret_box(pool))
        self.planner: PlannerStore = PostgresPlannerStore(pool)
        self.commands: RunCommands = PostgresRunCommands(pool)
        self.calendars: CalendarStore = PostgresCalendarStore(pool)

    async def seed(
        self, count: int, *, retry: dict[str, float] | None = None, first: int = 0,
        due_seconds_ago: float = 1.0, previous_secret: str | None = None,
        schedule: SeededSchedule | None = None,
    ) -> SeededSchedule:
        async with self.pool.acquire() as conn:
            if schedule is None:
                schedule = await seed_schedule(conn, await seed_tenant(conn), URL, retry=retry,
                                               previous_secret=previous_secret)
            await seed_due_runs(conn, schedule, count, first=first,
                                due_seconds_ago=due_seconds_ago)
        return schedule

    async def expire(self, run_id: uuid.UUID) -> None:
        await self.pool.execute(
            "UPDATE job_run SET claim_expires_at = now() - interval '1 ms' WHERE id = $1", run_id)

    async def pass_time(self, seconds: float) -> None:
        await asyncio.sleep(seconds)

    async def set_all(self, **columns: Any) -> None:
        sets = [f"{name} = ${i}" for i, name in enumerate(
            (n for n in columns if n != "expired"), start=1)]
        values = [v for n, v in columns.items() if n != "expired"]
        if columns.get("expired"):
            sets.append("claim_expires_at = now() - interval '1 second'")
        await self.pool.execute(f"UPDATE job_run SET {', '.join(sets)}", *values)

    async def set_claimed_by(self, run_id: uuid.UUID, owner: str) -> None:
        await self.pool.execute("UPDATE job_run SET claimed_by = $2 WHERE id = $1", run_id, owner)

    async def row(self, run_id: uuid.UUID) -> Row:
        row = await self.pool.fetchrow(ROW + " WHERE id = $1", run_id)
        assert row is not None
        return Row(**dict(row))

    async def rows(self) -> list[Row]:
        return [Row(**dict(r)) for r in await self.pool.fetch(ROW)]

    async def attempts(self) -> set[tuple[uuid.UUID, int, str]]:
        rows = await self.pool.fetch("SELECT run_id, attempt, claimed_by FROM run_attempt")
        return {(r["run_id"], r["attempt"], r["claimed_by"]) for r in rows}

    async def version(self, run_id: uuid.UUID) -> object:
        return await self.pool.fetchrow("SELECT xmin::text, * FROM job_run WHERE id = $1", run_id)

    async def db_now(self) -> datetime:
        now: datetime = await self.pool.fetchval("SELECT now()")
        return now

    async def count(self, status: str) -> int:
        return int(await self.pool.fetchval(
            "SELECT count(*) FROM job_run WHERE status = $1", status))

    async def pending_of(self, schedule_id: uuid.UUID) -> list[datetime]:
        rows = await self.pool.fetch(
            "SELECT scheduled_for FROM job_run WHERE schedule_id = $1 AND status = 'pending'"
            " ORDER BY scheduled_for", schedule_id)
        return [row["scheduled_for"] for row in rows]

    async def gate(self, schedule_id: uuid.UUID, policy: str | None,
                   pause_after_failures: int | None = None) -> None:
        await self.pool.execute(
            "UPDATE schedule SET overlap_policy = $2, pause_after_failures = $3 WHERE id = $1",
            schedule_id, policy or "allow", pause_after_failures)
        await self.pool.execute(
            "UPDATE job_run SET overlap_policy = $2 WHERE schedule_id = $1", schedule_id, policy)

    async def skip_reason(self, run_id: uuid.UUID) -> str | None:
        reason: str | None = await self.pool.fetchval(
            "SELECT skip_reason FROM job_run WHERE id = $1", run_id)
        return reason

    async def keys(self) -> list[tuple[uuid.UUID, datetime]]:
        rows = await self.pool.fetch("SELECT id, scheduled_for FROM job_run ORDER BY scheduled_for")
        return [(r["id"], r["scheduled_for"]) for r in rows]

    async def flow(self, schedule: SeededSchedule, key: str, *,
                   max_concurrency: int | None = None, rate_per_second: float | None = None,
                   burst: int | None = None) -> None:
        await seed_flow_control(self.pool, schedule, key, max_concurrency=max_concurrency,
                                rate_per_second=rate_per_second, burst=burst)

    async def flow_row(self, tenant_id: uuid.UUID, key: str) -> tuple[int, bool]:
        row = await self.pool.fetchrow(
            "SELECT in_flight, coalesce(held_until > now(), false) AS held FROM flow_control"
            " WHERE tenant_id = $1 AND key = $2", tenant_id, key)
        assert row is not None
        return row["in_flight"], row["held"]

    async def schedule_facts(self, schedule_id: uuid.UUID) -> ScheduleFacts:
        row = await self.pool.fetchrow(
            "SELECT status, paused_reason, consecutive_failures, overlap_run FROM schedule "
            "WHERE id = $1", schedule_id)
        assert row is not None
        return ScheduleFacts(**dict(row))


def world_for(request: pytest.FixtureRequest) -> World:
    """The store named by ``request.param``: real Postgres (``db_pool``) or the fake.
    Call it from a sync fixture: the Postgres server fixtures start outside the loop."""
    if request.param == "memory":
        return MemoryWorld()
    return PostgresWorld(request.getfixturevalue("db_pool"))
