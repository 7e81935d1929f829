"""Schedules written straight into Postgres for planner tests, and the pure maths to check
the runs the planner made against."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import defaultdict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import asyncpg

from cronwire.adapters.postgres.planner_store import Decide, PostgresPlannerStore
from cronwire.domain.cron import occurrences_between
from cronwire.domain.model import DueSchedule, PlanDecision
from cronwire.domain.planning import Span

INSERT_SCHEDULES = """
INSERT INTO schedule (id, tenant_id, name, cron, timezone, target, retry, misfire_policy,
                      catchup_window_seconds, status, next_fire_at, starts_at, ends_at,
                      signing_secret)
SELECT s.id, $1, 'planner-test', s.cron, s.timezone,
       '{"url": "http://127.0.0.1:9/hook", "method": "POST"}'::jsonb, '{}'::jsonb,
       s.policy, s.window_seconds, s.status, s.next_fire_at, s.starts_at, s.ends_at,
       'whsec_planner_test'
FROM unnest($2::uuid[], $3::text[], $4::text[], $5::text[], $6::int[], $7::text[],
            $8::timestamptz[], $9::timestamptz[], $10::timestamptz[])
     AS s(id, cron, timezone, policy, window_seconds, status, next_fire_at, starts_at, ends_at)
"""


@dataclass(frozen=True)
class ScheduleSpec:
    cron: str
    next_fire_at: datetime
    timezone: str = "UTC"
    policy: str = "fire_all"
    window_seconds: int = 3600
    status: str = "active"
    starts_at: datetime | None = None
    ends_at: datetime | None = None
    id: uuid.UUID = field(default_factory=uuid.uuid4)

    def expected(self, until: datetime | None = None) -> list[datetime]:
        """Pure maths: every occurrence in [next_fire_at, until or ends_at]."""
        last = until or self.ends_at
        assert last is not None
        first = max(self.next_fire_at, self.starts_at or self.next_fire_at)
        return occurrences_between(
            self.cron, self.timezone, first - timedelta(microseconds=1), last, 1_000_000
        )


async def create_tenant(conn: asyncpg.Connection | asyncpg.Pool) -> uuid.UUID:
    tenant_id = uuid.uuid4()
    await conn.execute("INSERT INTO tenant (id, name) VALUES ($1, 'planner-tests')", tenant_id)
    return tenant_id


async def insert_schedules(
    conn: asyncpg.Connection | asyncpg.Pool, tenant_id: uuid.UUID, specs: Sequence[ScheduleSpec]
) -> list[ScheduleSpec]:
    """Insert ``specs`` in one statement; returns them (for chaining)."""
    placed = list(specs)
    await conn.execute(
        INSERT_SCHEDULES,
        tenant_id,
        [s.id for s in placed],
        [s.cron for s in placed],
        [s.timezone for s in placed],
        [s.policy for s in placed],
        [s.window_seconds for s in placed],
        [s.status for s in placed],
        [s.next_fire_at for s in placed],
        [s.starts_at for s in placed],
        [s.ends_at for s in placed],
    )
    return placed


async def runs_by_schedule(
    conn: asyncpg.Connection | asyncpg.Pool,
) -> dict[uuid.UUID, list[datetime]]:
    """Every run's scheduled_for, grouped by schedule, oldest first (duplicates kept)."""
    rows = await conn.fetch("SELECT schedule_id, scheduled_for FROM job_run ORDER BY 1, 2")
    grouped: dict[uuid.UUID, list[datetime]] = defaultdict(list)
    for row in rows:
        grouped[row["schedule_id"]].append(row["scheduled_for"])
    return dict(grouped)


def mismatches(
    specs: Sequence[ScheduleSpec], found: dict[uuid.UUID, list[datetime]]
) -> list[str]:
    """Human-readable differences between the runs found and the pure maths (empty = exact)."""
    problems: list[str] = []
    for spec in specs:
        want, got = spec.expected(), found.get(spec.id, [])
        if got != want:
            missing = sorted(set(want) - set(got))
            extra = sorted(set(got) - set(want))
            dups = len(got) - len(set(got))
            problems.append(f"{spec.id}: missing {missing[:3]} extra {extra[:3]} dups {dups}")
    return problems


async def until(
    condition: Callable[[], Awaitable[bool]], within: float, interval: float = 0.05,
    saw: Callable[[], Awaitable[object]] | None = None,
) -> None:
    """Poll ``condition`` until it holds; fail after ``within`` seconds, saying what
    ``saw()`` found then (the counts that tell how far it got)."""
    deadline = time.monotonic() + within
    while not await condition():
        if time.monotonic() > deadline:
            seen = f"; saw {await saw()}" if saw is not None else ""
            name = getattr(condition, "__qualname__", "condition")
            raise AssertionError(f"{name} not met within {within}s{seen}")
        await asyncio.sleep(interval)


async def all_planned(conn: asyncpg.Connection | asyncpg.Pool) -> bool:
    """True once no active schedule has a further occurrence left."""
    left = await conn.fetchval(
        "SELECT count(*) FROM schedule WHERE status = 'active' AND next_fire_at IS NOT NULL"
    )
    return bool(left == 0)


def spread_workload(now: datetime, count: int, occurrences: int = 32) -> list[ScheduleSpec]:
    """``count`` schedules, each with exactly ``occurrences`` fires that all lie in the past.

    Second-level crons of different steps and zones, staggered starts; ``ends_at`` bounds each
    one, so the full set of runs is known in advance from the pure maths.
    """
    crons = [("* * * * * *", 1), ("*/2 * * * * *", 2), ("*/3 * * * * *", 3)]
    zones = ["UTC", "Europe/Berlin", "America/New_York", "Asia/Kolkata"]
    end = now.replace(microsecond=0) - timedelta(seconds=2)
    specs = []
    for i in range(count):
        cron, step = crons[i % len(crons)]
        last = end - timedelta(seconds=(i * 7) % 60 // step * step)
        last -= timedelta(seconds=last.second % step)
        first = last - timedelta(seconds=step * (occurrences - 1))
        specs.append(ScheduleSpec(cron=cron, timezone=zones[i % len(zones)],
                                  next_fire_at=first, ends_at=last))
    return specs


class CountingStore:
    """The real store, counting what its ``decide`` planned (not what the insert kept), so a
    test can tell whether two planners ever planned the same occurrence."""

    def __init__(self, store: PostgresPlannerStore) -> None:
        self.store = store
        self.planned = 0

    async def plan_due(
        self, *, limit: int, lookahead_seconds: float, decide: Decide,
        ahead_seconds: float | None = None,
    ) -> tuple[int, int]:
        def counting(schedules: Sequence[DueSchedule], now: datetime,
                     writable: Span | None) -> PlanDecision:
            decision = decide(schedules, now, writable)
            self.planned += len(decision.runs)
            return decision

        return await self.store.plan_due(
            limit=limit, lookahead_seconds=lookahead_seconds, decide=counting,
            ahead_seconds=ahead_seconds,
        )

    async def db_now(self) -> datetime:
        return await self.store.db_now()
