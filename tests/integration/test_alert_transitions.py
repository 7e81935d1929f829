"""Alert transitions in Postgres (ADR 0036): the late check run by many replicas at once
inserts one event per transition, and the terminal write counts consecutive failures."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime

import asyncpg

from cronwire.adapters.postgres.alert_outbox import PostgresAlertOutbox
from cronwire.adapters.postgres.run_store import PostgresRunStore
from cronwire.adapters.postgres.schedule_store import PostgresScheduleStore
from cronwire.domain.model import RunResolution, RunStatus
from cronwire.harness.seeding import seed_schedule, seed_tenant
from tests.support.secrets import secret_box


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
    stores = [PostgresAlertOutbox(db_pool, secret_box(db_pool)) for _ in range(3)]
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
    assert await PostgresAlertOutbox(db_pool, secret_box(db_pool)).check_late(3600) == 0


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


async def _failing_schedule(pool: asyncpg.Pool, settings: str, runs: int) -> tuple[
        uuid.UUID, uuid.UUID, list[tuple[uuid.UUID, datetime]]]:
    """A schedule with these rules (an SQL SET list) and ``runs`` running runs of it."""
    tenant = await seed_tenant(pool)  # type: ignore[arg-type]
    schedule = await seed_schedule(pool, tenant, "http://127.0.0.1:9/")  # type: ignore[arg-type]
    await pool.execute(f"UPDATE schedule SET {settings} WHERE id = $1", schedule.id)
    return tenant, schedule.id, [await _running_run(pool, tenant, schedule.id, s)
                                 for s in range(runs)]


def _resolution(run_id: uuid.UUID, at: datetime, status: RunStatus) -> RunResolution:
    return RunResolution(run_id=run_id, scheduled_for=at, status=status, attempt_count=1,
                         retry_delay_seconds=None, last_status_code=500, last_error="boom",
                         attempt=None, lease_generation=1)


async def test_failures_in_one_batch_and_across_batches_make_one_failing_event(
    db_pool: asyncpg.Pool,
) -> None:
    _, schedule_id, runs = await _failing_schedule(db_pool, "alert_after_failures = 3", 6)
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
                                  schedule_id) == 2


async def _alert_destination(pool: asyncpg.Pool, tenant: uuid.UUID, *events: str) -> None:
    await pool.execute(
        "INSERT INTO tenant_alert_destination (tenant_id, url, events, signing_secret) "
        "VALUES ($1, 'http://127.0.0.1:9/alerts', $2, 'whsec_x')", tenant, list(events))


async def test_pause_after_failures_records_one_paused_event_beside_the_failing_one(
    db_pool: asyncpg.Pool,
) -> None:
    """The statement that pauses also records schedule.paused (ADR 0036), from one
    failure count: the failing alert and the pause read the same consecutive_failures."""
    tenant, schedule_id, runs = await _failing_schedule(
        db_pool, "alert_after_failures = 2, pause_after_failures = 3", 4)
    await _alert_destination(db_pool, tenant, "schedule.paused")
    store = PostgresRunStore(db_pool)
    await store.resolve("me", [_resolution(*runs[0], RunStatus.FAILED),
                               _resolution(*runs[1], RunStatus.FAILED)])
    await store.resolve("me", [_resolution(*runs[2], RunStatus.FAILED)])
    state = await db_pool.fetchrow(
        "SELECT status, consecutive_failures, paused_reason, alert_failing FROM schedule "
        "WHERE id = $1", schedule_id)
    assert (state["status"], state["consecutive_failures"], state["alert_failing"]) == (
        "paused", 3, True)
    assert state["paused_reason"].startswith("Paused automatically after 3 consecutive")
    events = await db_pool.fetch("SELECT type, run_id, status, detail FROM alert_event "
                                 "ORDER BY created_at, type")
    assert [(e["type"], e["run_id"], e["status"]) for e in events] == [
        ("schedule.failing", runs[1][0], "undelivered"),  # the destination does not want it
        ("schedule.paused", runs[2][0], "pending")]
    assert events[1]["detail"] == {"consecutive_failures": 3, "pause_after_failures": 3,
                                   "last_status_code": 500, "last_error": "boom"}
    # Paused already: a late failure of a run in flight counts but pauses (and tells) no more.
    await store.resolve("me", [_resolution(*runs[3], RunStatus.FAILED)])
    assert await db_pool.fetchval("SELECT count(*) FROM alert_event") == 2


async def test_two_replicas_failing_at_once_pause_once_and_tell_once(
    db_pool: asyncpg.Pool,
) -> None:
    """No alert rule at all: schedule.paused is about the pause, not a rule."""
    _, schedule_id, runs = await _failing_schedule(db_pool, "pause_after_failures = 4", 8)
    stores = [PostgresRunStore(db_pool) for _ in range(4)]
    await asyncio.gather(*(
        store.resolve("me", [_resolution(*runs[2 * i], RunStatus.FAILED),
                             _resolution(*runs[2 * i + 1], RunStatus.FAILED)])
        for i, store in enumerate(stores)))
    assert await db_pool.fetchval("SELECT consecutive_failures FROM schedule WHERE id = $1",
                                  schedule_id) == 8
    rows = await db_pool.fetch("SELECT type, status FROM alert_event")
    assert [(r["type"], r["status"]) for r in rows] == [("schedule.paused", "undelivered")]


async def test_a_resumed_schedule_stays_failing_until_a_success_recovers_it(
    db_pool: asyncpg.Pool,
) -> None:
    """A resume resets the shared count (or the next failure would pause again at once);
    the failing alert is not cleared by it: the next success says recovered."""
    tenant, schedule_id, runs = await _failing_schedule(
        db_pool, "alert_after_failures = 2, pause_after_failures = 2", 4)
    store = PostgresRunStore(db_pool)
    await store.resolve("me", [_resolution(*runs[0], RunStatus.FAILED),
                               _resolution(*runs[1], RunStatus.FAILED)])
    resumed = await PostgresScheduleStore(db_pool, secret_box(db_pool)).set_paused(tenant, schedule_id, False)
    assert resumed.consecutive_failures == 0
    await store.resolve("me", [_resolution(*runs[2], RunStatus.FAILED)])
    assert await db_pool.fetchval("SELECT alert_failing FROM schedule WHERE id = $1",
                                  schedule_id) is True
    await store.resolve("me", [_resolution(*runs[3], RunStatus.SUCCEEDED)])
    types = [r["type"] for r in await db_pool.fetch(
        "SELECT type FROM alert_event ORDER BY created_at, type")]
    assert types == ["schedule.failing", "schedule.paused", "schedule.recovered"]


async def test_a_flapping_schedule_sends_one_pair_per_minute_and_counts_the_other_flips(
    db_pool: asyncpg.Pool,
) -> None:
    """Flap damping (ADR 0055): fail, succeed, fail, succeed, fail within a minute send
    failing and recovered once; the three flips after them are counted, and the next
    event sent, a minute after the first failing, carries the count. The minute is the
    database's: the test moves the window's start back instead of waiting."""
    tenant, schedule_id, runs = await _failing_schedule(db_pool, "alert_after_failures = 1", 9)
    await _alert_destination(db_pool, tenant, "schedule.failing", "schedule.recovered")
    store = PostgresRunStore(db_pool)

    async def flip(index: int) -> None:
        status = RunStatus.FAILED if index % 2 == 0 else RunStatus.SUCCEEDED
        await store.resolve("me", [_resolution(*runs[index], status)])

    async def sent() -> list[tuple[str, uuid.UUID, dict[str, object]]]:
        rows = await db_pool.fetch("SELECT type, run_id, detail FROM alert_event "
                                   "ORDER BY created_at, type")
        return [(r["type"], r["run_id"], r["detail"]) for r in rows]

    async def suppressed() -> int:
        return int(await db_pool.fetchval(
            "SELECT alert_suppressed_flips FROM schedule WHERE id = $1", schedule_id))

    for index in range(5):
        await flip(index)
    assert [(t, r) for t, r, _ in await sent()] == [
        ("schedule.failing", runs[0][0]), ("schedule.recovered", runs[1][0])]
    assert await suppressed() == 3  # fail, succeed, fail: not sent

    await db_pool.execute("UPDATE schedule SET alert_flap_window_start = "
                          "alert_flap_window_start - interval '61 seconds' WHERE id = $1",
                          schedule_id)
    await flip(5)  # recovered, but the tenant was told so already: counted
    assert len(await sent()) == 2 and await suppressed() == 4
    await flip(6)  # failing, a minute on: sent, with the count
    await flip(7)  # recovered: the pair's second half, sent
    await flip(8)  # failing again inside the new minute: counted
    events = await sent()
    assert [(t, r) for t, r, _ in events] == [
        ("schedule.failing", runs[0][0]), ("schedule.recovered", runs[1][0]),
        ("schedule.failing", runs[6][0]), ("schedule.recovered", runs[7][0])]
    assert events[2][2]["suppressed_flips"] == 4
    assert all("suppressed_flips" not in detail for i, (_, _, detail) in enumerate(events)
               if i != 2)
    assert await suppressed() == 1
    state = await db_pool.fetchrow("SELECT alert_failing, alert_told_failing FROM schedule "
                                   "WHERE id = $1", schedule_id)
    assert (state["alert_failing"], state["alert_told_failing"]) == (True, False)

    # Still failing a minute after that damped flip: told once, with the count, by any
    # of the replicas checking at once.
    outboxes = [PostgresAlertOutbox(db_pool, secret_box(db_pool)) for _ in range(3)]
    assert sum(await asyncio.gather(*(o.tell_untold_failing() for o in outboxes))) == 0
    await db_pool.execute("UPDATE schedule SET alert_flap_window_start = "
                          "alert_flap_window_start - interval '61 seconds' WHERE id = $1",
                          schedule_id)
    assert sum(await asyncio.gather(*(o.tell_untold_failing() for o in outboxes))) == 1
    last = (await sent())[-1]
    assert last[0] == "schedule.failing" and last[1] is None
    assert last[2] == {"consecutive_failures": 1, "after_failures": 1, "suppressed_flips": 1}
    assert await suppressed() == 0
    assert await PostgresAlertOutbox(db_pool, secret_box(db_pool)).tell_untold_failing() == 0
