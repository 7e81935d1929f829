"""The scheduling semantics where runs are made and delivered, in-process on real Postgres:
the planner's jitter, one-time and limited schedules; a replay's delivery; a schedule that
pauses itself after failures; the overlap gate against a slow receiver."""

from __future__ import annotations

import asyncio
import functools
import itertools
import json
import uuid
from collections.abc import AsyncIterator
from datetime import datetime, timedelta

import asyncpg
import pytest
from standardwebhooks.webhooks import Webhook

from cronwire.adapters.postgres.planner_store import PostgresPlannerStore
from cronwire.adapters.postgres.run_commands import PostgresRunCommands
from cronwire.adapters.postgres.schedule_store import PostgresScheduleStore
from cronwire.domain.jitter import jittered
from cronwire.domain.model import (
    OverlapPolicy,
    RetryPolicy,
    Target,
    idempotency_key_for,
    run_id_for,
)
from cronwire.domain.planning import decide
from cronwire.domain.schedules import ScheduleSpec
from cronwire.harness.seeding import seed_tenant
from cronwire.harness.sink import Reply, always
from tests.support.executor_harness import Harness, executor_harness, running
from tests.support.secrets import secret_box


@pytest.fixture
async def harness(db_pool: asyncpg.Pool) -> AsyncIterator[Harness]:
    async with executor_harness(db_pool) as harness:
        yield harness


async def plan(pool: asyncpg.Pool, lookahead: float = 5.0) -> int:
    """One planner pass, as the Planner makes it; returns runs inserted."""
    store = PostgresPlannerStore(pool)
    _, inserted = await store.plan_due(
        limit=500, lookahead_seconds=lookahead,
        decide=functools.partial(decide, lookahead_seconds=lookahead))
    return inserted


async def create(pool: asyncpg.Pool, url: str, **fields: object) -> uuid.UUID:
    async with pool.acquire() as conn:
        tenant = await seed_tenant(conn)
    cron = fields.pop("cron", "* * * * * *")
    spec = ScheduleSpec(name="s", cron=cron, target=Target(url),  # type: ignore[arg-type]
                        retry=RetryPolicy(1, 1, 1), **fields)  # type: ignore[arg-type]
    record = await PostgresScheduleStore(pool, secret_box(pool)).create(
        tenant, spec, paused=False, signing_secret="whsec_" + "M" * 32, max_schedules=10)
    return record.id


async def test_jitter_delays_each_occurrence_by_its_own_deterministic_offset(
    db_pool: asyncpg.Pool,
) -> None:
    schedules = [await create(db_pool, "http://127.0.0.1:9/", jitter_seconds=60)
                 for _ in range(20)]
    await plan(db_pool)
    rows = await db_pool.fetch("SELECT schedule_id, scheduled_for, fire_after FROM job_run")
    assert rows and {r["schedule_id"] for r in rows} == set(schedules)
    offsets = set()
    for row in rows:
        expected = jittered(row["schedule_id"], row["scheduled_for"], 60)
        assert row["fire_after"] == expected  # what every replica computes
        offsets.add((row["fire_after"] - row["scheduled_for"]).total_seconds())
    assert all(0 <= offset < 60 for offset in offsets) and len(offsets) > 10


async def test_a_one_time_schedule_fires_once_and_completes(db_pool: asyncpg.Pool) -> None:
    now: datetime = await db_pool.fetchval("SELECT now()")
    at = now.replace(microsecond=0) + timedelta(seconds=2)
    sid = await create(db_pool, "http://127.0.0.1:9/", cron=None, at=at)
    assert await plan(db_pool) == 1
    assert await db_pool.fetchval("SELECT status FROM schedule WHERE id = $1", sid) == "completed"
    assert await db_pool.fetchval("SELECT next_fire_at FROM schedule WHERE id = $1", sid) is None
    assert await plan(db_pool, lookahead=3600) == 0
    assert [r["scheduled_for"] for r in await db_pool.fetch("SELECT scheduled_for FROM job_run")] \
        == [at]


async def test_max_runs_counts_scheduled_occurrences_and_then_completes(
    db_pool: asyncpg.Pool,
) -> None:
    sid = await create(db_pool, "http://127.0.0.1:9/", cron="* * * * * *", max_runs=3)
    assert await plan(db_pool, lookahead=10) == 3
    row = await db_pool.fetchrow("SELECT status, runs_planned, next_fire_at FROM schedule "
                                 "WHERE id = $1", sid)
    assert tuple(row) == ("completed", 3, None)
    assert await plan(db_pool, lookahead=60) == 0
    assert await db_pool.fetchval("SELECT count(*) FROM job_run") == 3


async def test_a_replay_delivers_the_original_occurrence_under_a_new_webhook_id(
    harness: Harness,
) -> None:
    pool = harness.pool
    sid = await create(pool, harness.sink.url, cron="0 * * * *")
    tenant = await pool.fetchval("SELECT tenant_id FROM schedule WHERE id = $1", sid)
    at = (await pool.fetchval("SELECT now()")).replace(minute=0, second=0,
                                                        microsecond=0) - timedelta(hours=2)
    original = run_id_for(sid, at)
    await pool.execute(
        "INSERT INTO job_run (id, tenant_id, schedule_id, scheduled_for, idempotency_key, "
        "status, fire_after, attempt_count, finished_at) "
        "VALUES ($1, $2, $3, $4, $5, 'failed', $4, 1, now())",
        original, tenant, sid, at, idempotency_key_for(original))
    replay = await PostgresRunCommands(pool).replay(tenant, original,
                                                  max_pending_runs=10)
    executor, signals, _ = harness.executor()
    async with running(executor):
        await signals.settled.wait_count(1, within=15)
    [arrival] = harness.sink.arrivals
    assert arrival.headers["x-cronwire-scheduled-for"] == at.strftime("%Y-%m-%dT%H:%M:%SZ")
    assert arrival.webhook_id == idempotency_key_for(replay.id) != idempotency_key_for(original)
    assert arrival.headers["x-cronwire-run-id"] == str(replay.id)
    body = json.loads(arrival.body)
    assert body["scheduled_for"] == at.strftime("%Y-%m-%dT%H:%M:%SZ")
    assert body["run_id"] == str(replay.id)
    Webhook("whsec_" + "M" * 32).verify(arrival.body, dict(arrival.headers))  # create()'s
    assert await harness.statuses() == {"failed": 1, "succeeded": 1}


async def test_a_schedule_pauses_itself_after_consecutive_failures(harness: Harness) -> None:
    """500 on every attempt, max_attempts 1, pause_after_failures 3: the third failed run
    pauses the schedule with a reason naming the count and the error, and the runs it had
    written ahead are taken back."""
    harness.sink.behaviour = always(Reply(status=500))
    pool = harness.pool
    sid = await create(pool, harness.sink.url, cron="* * * * * *", pause_after_failures=3)
    executor, _, _ = harness.executor()
    async with running(executor):
        for _ in range(40):  # bounded: one planner pass per second at most
            await plan(pool, lookahead=1)
            if await pool.fetchval("SELECT status FROM schedule WHERE id = $1", sid) == "paused":
                break
            await asyncio.sleep(0.5)
    row = await pool.fetchrow("SELECT status, consecutive_failures, paused_reason, paused_at "
                              "FROM schedule WHERE id = $1", sid)
    assert row["status"] == "paused" and row["consecutive_failures"] >= 3
    assert "consecutive failed runs" in row["paused_reason"]
    assert "pause_after_failures: 3" in row["paused_reason"]
    assert "500" in row["paused_reason"] and row["paused_at"] is not None
    after = await pool.fetchval("SELECT count(*) FROM job_run WHERE schedule_id = $1 AND "
                                "status = 'pending' AND scheduled_for > now()", sid)
    assert after == 0


async def test_skip_never_lets_two_runs_of_a_schedule_overlap(harness: Harness) -> None:
    """Every second, the receiver takes 2.5 s: runs never overlap at the receiver, and every
    occurrence ends succeeded or skipped with reason overlap."""
    harness.sink.behaviour = always(Reply(delay=2.5))
    pool = harness.pool
    sid = await create(pool, harness.sink.url, cron="* * * * * *",
                       overlap_policy=OverlapPolicy.SKIP)
    executor, _, _ = harness.executor(workers=8, batch=8, lease_seconds=10,
                                      delivery_timeout=5)
    async with running(executor):
        for _ in range(8):
            await plan(pool, lookahead=1)
            await asyncio.sleep(1)
        await pool.execute("UPDATE schedule SET status = 'paused' WHERE id = $1", sid)

        async def settled() -> bool:
            return await pool.fetchval("SELECT count(*) FROM job_run WHERE status IN "
                                       "('pending', 'running', 'retrying')") == 0

        await harness.until(settled, within=30)
    rows = await pool.fetch("SELECT status, skip_reason FROM job_run")
    outcomes = {(r["status"], r["skip_reason"]) for r in rows}
    assert outcomes <= {("succeeded", None), ("skipped", "overlap")}
    assert ("skipped", "overlap") in outcomes and ("succeeded", None) in outcomes
    spans = sorted((a.arrived_at, a.answered_at or 0.0) for a in harness.sink.arrivals)
    assert all(later[0] >= earlier[1] - 0.05 for earlier, later in itertools.pairwise(spans))



