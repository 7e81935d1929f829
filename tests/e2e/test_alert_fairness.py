"""Alerts fair between tenants (ADR 0055), over two real replicas: tenant A's 40 flapping
schedules send to a destination that never answers, and tenant B's one alert still
arrives within seconds. Before per-tenant turns and continuous dispatch, the claim took
A's older events first and each pass waited for its whole batch to time out: B's alert
came after about 20 s here (32 s in the finding)."""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import asyncpg
import httpx

from cronwire.adapters.postgres.run_store import PostgresRunStore
from cronwire.adapters.postgres.tenants import PostgresTenantStore
from cronwire.domain.model import RunResolution, RunStatus
from cronwire.harness.seeding import seed_schedule
from cronwire.harness.sink import Reply, Sink, always
from tests.support.polling import wait_until
from tests.support.replicas import ReplicaSet

FLAPPING_SCHEDULES = 40
FLIPS = 6  # fail, succeed, fail, succeed, fail, succeed
# The serve default: each of A's sends hangs this long before it is given up.
DELIVERY_TIMEOUT = 10.0
# B's alert must arrive within this: a few claim passes (0.2 s each) and one delivery on
# loopback, with room for a loaded 2-core machine. Before the fix it took ~20 s.
B_BOUND_SECONDS = 5.0


async def _tenant(pool: asyncpg.Pool, name: str, replica_url: str,
                  receiver_url: str) -> uuid.UUID:
    issued = await PostgresTenantStore(pool).create(name)
    async with httpx.AsyncClient(base_url=replica_url, headers={
            "Authorization": f"Bearer {issued.token}"}) as client:
        put = await client.put("/v1/alerts", json={"url": receiver_url})
        assert put.status_code == 200, put.text
    return issued.tenant_id


async def _flapping_runs(pool: asyncpg.Pool, tenant: uuid.UUID, schedules: int,
                         flips: int) -> list[list[tuple[uuid.UUID, datetime]]]:
    """``schedules`` schedules alerting after one failure, each with ``flips`` running
    runs leased by 'me': per flip, one run of every schedule."""
    base = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=10)
    rounds: list[list[tuple[uuid.UUID, datetime]]] = [[] for _ in range(flips)]
    for _ in range(schedules):
        schedule = await seed_schedule(pool, tenant, "http://127.0.0.1:9/")  # type: ignore[arg-type]
        await pool.execute("UPDATE schedule SET alert_after_failures = 1 WHERE id = $1",
                           schedule.id)
        for flip in range(flips):
            run_id, at = uuid.uuid4(), base + timedelta(seconds=flip)
            await pool.execute(
                "INSERT INTO job_run (id, tenant_id, schedule_id, scheduled_for, "
                "idempotency_key, status, fire_after, claimed_by, claim_expires_at, "
                "attempt_count, lease_generation) VALUES ($1, $2, $3, $4, 'k', 'running', $4, "
                "'me', now() + interval '1 hour', 1, 1)", run_id, tenant, schedule.id, at)
            rounds[flip].append((run_id, at))
    return rounds


def _ended(run: tuple[uuid.UUID, datetime], status: RunStatus) -> RunResolution:
    return RunResolution(run_id=run[0], scheduled_for=run[1], status=status, attempt_count=1,
                         retry_delay_seconds=None, last_status_code=500, last_error="boom",
                         attempt=None, lease_generation=1)


async def test_a_tenant_with_a_hanging_destination_does_not_delay_another_tenants_alert(
    db_pool: asyncpg.Pool, database_url: str, tmp_path: Path
) -> None:
    hanging = Sink(behaviour=always(Reply(status=200, delay=120)))
    async with hanging, Sink() as receiver, ReplicaSet(database_url, log_dir=tmp_path) as fleet:
        replicas = [await fleet.spawn(name, roles="api", delivery_timeout=DELIVERY_TIMEOUT,
                                      alert_check_seconds=0.2,
                                      alert_retry_initial_seconds=0.2)
                    for name in ("r1", "r2")]
        tenant_a = await _tenant(db_pool, "flapping", replicas[0].base_url, hanging.url)
        tenant_b = await _tenant(db_pool, "victim", replicas[1].base_url, receiver.url)
        a_rounds = await _flapping_runs(db_pool, tenant_a, FLAPPING_SCHEDULES, FLIPS)
        [b_round] = await _flapping_runs(db_pool, tenant_b, 1, 1)
        store = PostgresRunStore(db_pool)
        for flip, runs in enumerate(a_rounds):
            status = RunStatus.FAILED if flip % 2 == 0 else RunStatus.SUCCEEDED
            await store.resolve("me", [_ended(run, status) for run in runs])
        # A's sends are hanging on both replicas before B's schedule fails.
        await hanging.wait_for(lambda s: len(s.arrivals) >= 2, within=30)
        started = time.monotonic()
        await store.resolve("me", [_ended(b_round[0], RunStatus.FAILED)])
        await receiver.wait_for(lambda s: len(s.arrivals) >= 1, within=60)
        latency = receiver.arrivals[0].arrived_at - started
        a_sent = len(hanging.arrivals)

        async def b_delivered() -> bool:
            return await db_pool.fetchval(
                "SELECT status FROM alert_event WHERE tenant_id = $1", tenant_b) == "delivered"
        await wait_until(b_delivered, within=30)
    print(f"tenant B's alert latency: {latency:.2f} s (A's sends started: {a_sent})")
    assert latency < B_BOUND_SECONDS, f"B's alert took {latency:.1f} s"
    # Tenant A held at most two sends at a time across both replicas (none had ended).
    assert a_sent <= 2
    assert await db_pool.fetchval("SELECT type FROM alert_event WHERE tenant_id = $1",
                                  tenant_b) == "schedule.failing"
