"""Alert transitions in Postgres (ADR 0036): the late check run by many replicas at once
inserts one event per transition, and the terminal write counts consecutive failures."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime

import asyncpg

from cronwire.adapters.postgres.alert_outbox import PostgresAlertOutbox
from cronwire.adapters.postgres.run_store import PostgresRunStore
from cronwire.domain.model import RunResolution, RunStatus
from cronwire.harness.seeding import seed_schedule, seed_tenant


async def _late_schedule(pool: asyncpg.Pool) -> uuid.UUID:
    tenant = await seed_tenant(pool)  # type: ignore[arg-type]
    schedule = await seed_schedule(pool, tenant, "http://127.0.0.1:9/")  # type: ignore[arg-type]
    await pool.execute(
        "UPDATE schedule SET alert_late_after_seconds = 1, "
        "next_fire_at = now() - interval '10 seconds' WHERE id = $1", schedule.id)
    return schedule.id


async def test_the_late_check_from_three_replicas_at_once_inserts_one_event(
    db_pool: asyncpg.Pool,
) -> None:
    schedule_id = await _late_schedule(db_pool)
    stores = [PostgresAlertOutbox(db_pool) for _ in range(3)]
    for _ in range(10):  # ten rounds of three concurrent checks
        await asyncio.gather(*(store.check_late(3600) for store in stores))
    rows = await db_pool.fetch("SELECT type, run_id, status FROM alert_event")
    assert [(r["type"], r["run_id"], r["status"]) for r in rows] == [
        ("schedule.late", None, "undelivered")]  # no destination: listed, never sent
    # Back on time (the planner caught up): cleared without an event; late again: a new one.
    await db_pool.execute("UPDATE schedule SET next_fire_at = now() + interval '1 hour' "
                          "WHERE id = $1", schedule_id)
    await asyncio.gather(*(store.check_late(3600) for store in stores))
    assert await db_pool.fetchval("SELECT alert_late FROM schedule WHERE id = $1",
                                  schedule_id) is False
    await db_pool.execute("UPDATE schedule SET next_fire_at = now() - interval '5 seconds' "
                          "WHERE id = $1", schedule_id)
    await asyncio.gather(*(store.check_late(3600) for store in stores))
    assert await db_pool.fetchval("SELECT count(*) FROM alert_event") == 2


async def test_a_paused_schedule_is_never_late(db_pool: asyncpg.Pool) -> None:
    schedule_id = await _late_schedule(db_pool)
    await db_pool.execute("UPDATE schedule SET status = 'paused' WHERE id = $1", schedule_id)
    assert await PostgresAlertOutbox(db_pool).check_late(3600) == 0


async def _running_run(pool: asyncpg.Pool, tenant: uuid.UUID, schedule: uuid.UUID,
                       second: int) -> tuple[uuid.UUID, datetime]:
    run_id = uuid.uuid4()
    at = datetime.now(UTC).replace(day=1, hour=0, minute=0, second=second, microsecond=0)
    await pool.execute(
        "INSERT INTO job_run (id, tenant_id, schedule_id, scheduled_for, idempotency_key, "
        "status, fire_after, claimed_by, claim_expires_at, attempt_count, lease_generation) "
        "VALUES ($1, $2, $3, $4, 'k', 'running', $4, 'me', now() + interval '1 minute', 1, 1)",
        run_id, tenant, schedule, at)
    return run_id, at


def _resolution(run_id: uuid.UUID, at: datetime, status: RunStatus) -> RunResolution:
    return RunResolution(run_id=run_id, scheduled_for=at, status=status, attempt_count=1,
                         retry_delay_seconds=None, last_status_code=500, last_error="boom",
                         attempt=None, lease_generation=1)


async def test_failures_in_one_batch_and_across_batches_make_one_failing_event(
    db_pool: asyncpg.Pool,
) -> None:
    tenant = await seed_tenant(db_pool)  # type: ignore[arg-type]
    schedule = await seed_schedule(db_pool, tenant, "http://127.0.0.1:9/")  # type: ignore[arg-type]
    await db_pool.execute("UPDATE schedule SET alert_after_failures = 3 WHERE id = $1",
                          schedule.id)
    runs = [await _running_run(db_pool, tenant, schedule.id, s) for s in range(6)]
    store = PostgresRunStore(db_pool)
    # fail, fail (batch 1); fail, success (batch 2: failing at 3, then recovered at once)
    await store.resolve("me", [_resolution(*runs[0], RunStatus.FAILED),
                               _resolution(*runs[1], RunStatus.FAILED)])
    assert await db_pool.fetchval("SELECT count(*) FROM alert_event") == 0
    await store.resolve("me", [_resolution(*runs[2], RunStatus.FAILED)])
    await store.resolve("me", [_resolution(*runs[3], RunStatus.SUCCEEDED)])
    # A success resets the count: two more failures stay below the rule.
    await store.resolve("me", [_resolution(*runs[4], RunStatus.FAILED),
                               _resolution(*runs[5], RunStatus.FAILED)])
    events = await db_pool.fetch("SELECT type, run_id, detail FROM alert_event "
                                 "ORDER BY created_at, type")
    assert [(e["type"], e["run_id"]) for e in events] == [
        ("schedule.failing", runs[2][0]), ("schedule.recovered", runs[3][0])]
    assert events[0]["detail"]["consecutive_failures"] == 3
    assert await db_pool.fetchval("SELECT consecutive_failures FROM schedule WHERE id = $1",
                                  schedule.id) == 2
