"""The alert claim and dispatcher against real Postgres (ADR 0055): tenants take turns,
no tenant holds more than its in-flight slots across replicas, and a send that hangs
holds only its own slot, never the pass."""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from datetime import UTC, datetime

import asyncpg

from cronwire.adapters.metrics import PrometheusMetrics
from cronwire.adapters.postgres.alert_outbox import PostgresAlertOutbox
from cronwire.domain.delivery import DeliveryRequest, DeliveryResult, Outcome
from cronwire.service.alert_dispatcher import AlertDispatcher
from tests.support.polling import wait_until
from tests.support.secrets import secret_box


async def _tenant_with_events(pool: asyncpg.Pool, events: int, age_seconds: int,
                              url: str = "http://127.0.0.1:9/alerts") -> uuid.UUID:
    """A tenant with a destination and ``events`` pending events, the oldest due
    ``age_seconds`` ago, one second apart."""
    tenant = await pool.fetchval("INSERT INTO tenant (id, name) VALUES (gen_random_uuid(), "
                                 "'t') RETURNING id")
    await pool.execute(
        "INSERT INTO tenant_alert_destination (tenant_id, url, events, signing_secret) "
        "VALUES ($1, $2, '{schedule.failing}', 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw')",
        tenant, url)
    await pool.execute(
        "INSERT INTO alert_event (id, tenant_id, schedule_id, schedule_name, type, fire_after) "
        "SELECT gen_random_uuid(), $1, gen_random_uuid(), 's', 'schedule.failing', "
        "now() - make_interval(secs => $2 - i) FROM generate_series(0, $3 - 1) AS i",
        tenant, age_seconds, events)
    return tenant


async def test_tenants_take_turns_oldest_first_within_their_slots(db_pool: asyncpg.Pool) -> None:
    noisy = await _tenant_with_events(db_pool, 30, age_seconds=600)  # oldest and most
    quiet = await _tenant_with_events(db_pool, 3, age_seconds=60)
    single = await _tenant_with_events(db_pool, 1, age_seconds=30)
    outbox = PostgresAlertOutbox(db_pool, secret_box(db_pool))
    claimed = await outbox.claim("r1", 50, 30, 2)
    tenants = [item.event.tenant_id for item in claimed]
    # Each tenant's first, oldest tenant first, then the second of those that have one.
    assert sorted(tenants[:3], key=[noisy, quiet, single].index) == [noisy, quiet, single]
    assert Counter(tenants) == {noisy: 2, quiet: 2, single: 1}
    # The slots are the fleet's: another replica gets nothing of theirs while they hold.
    assert await PostgresAlertOutbox(db_pool, secret_box(db_pool)).claim("r2", 50, 30, 2) == []
    # A lease that expired frees its slot (and its event is claimed again first).
    expired = next(item.event.id for item in claimed if item.event.tenant_id == noisy)
    await db_pool.execute("UPDATE alert_event SET claim_expires_at = now() - interval '1 s' "
                          "WHERE id = $1", expired)
    [again] = await PostgresAlertOutbox(db_pool, secret_box(db_pool)).claim("r2", 50, 30, 2)
    assert again.event.id == expired and again.event.attempt_count == 2


async def test_replicas_claiming_at_once_never_exceed_a_tenants_slots(
    db_pool: asyncpg.Pool,
) -> None:
    tenants = [await _tenant_with_events(db_pool, 20, age_seconds=100) for _ in range(5)]
    outboxes = [PostgresAlertOutbox(db_pool, secret_box(db_pool)) for _ in range(4)]
    batches = await asyncio.gather(*(o.claim(f"r{i}", 50, 30, 2)
                                     for i, o in enumerate(outboxes)))
    ids = [item.event.id for batch in batches for item in batch]
    assert len(ids) == len(set(ids))  # no event claimed twice
    per_tenant = Counter(item.event.tenant_id for batch in batches for item in batch)
    assert per_tenant == dict.fromkeys(tenants, 2)


class HangingForOne:
    """A Deliverer whose sends to ``hang_url`` never end by themselves (as a receiver
    that holds the connection while the Deliverer overstays its timeout), and answer
    200 at once elsewhere."""

    def __init__(self, hang_url: str) -> None:
        self.hang_url = hang_url
        self.delivered: list[uuid.UUID] = []
        self.hanging = 0

    async def deliver(self, request: DeliveryRequest) -> DeliveryResult:
        started = datetime.now(UTC)
        if request.url == self.hang_url:
            self.hanging += 1
            await asyncio.Event().wait()
        self.delivered.append(request.tenant_id)
        return DeliveryResult(outcome=Outcome.SUCCESS, status_code=200, error=None,
                              started_at=started, finished_at=datetime.now(UTC),
                              duration_ms=1, response_excerpt=None, retry_after_seconds=None)

    async def close(self) -> None:
        return None


async def test_a_hanging_send_holds_its_slot_not_the_pass(db_pool: asyncpg.Pool) -> None:
    hang_url = "http://127.0.0.1:9/hangs"
    stuck = await _tenant_with_events(db_pool, 10, age_seconds=600, url=hang_url)
    deliverer = HangingForOne(hang_url)
    dispatcher = AlertDispatcher(
        PostgresAlertOutbox(db_pool, secret_box(db_pool)), deliverer, PrometheusMetrics(),  # type: ignore[arg-type]
        owner="r1", interval_seconds=0.05, delivery_timeout=2.0, retry_initial_seconds=60)
    stopping = asyncio.Event()
    loop = asyncio.create_task(dispatcher.run(stopping))
    try:
        await wait_until(lambda: deliverer.hanging == 2, within=10)
        other = await _tenant_with_events(db_pool, 3, age_seconds=1)
        await wait_until(lambda: deliverer.delivered.count(other) == 3, within=5)
        assert deliverer.hanging == 2  # the other tenant's sends passed the stuck ones
        # The hard bound (1.5 x the timeout) ends the hanging sends: retried later.

        async def cut_off() -> bool:
            return await db_pool.fetchval("SELECT count(*) FROM alert_event WHERE "
                                          "tenant_id = $1 AND status = 'retrying'", stuck) >= 2
        await wait_until(cut_off, within=10)
        assert dispatcher.in_flight <= 2
    finally:
        stopping.set()
        await asyncio.wait_for(loop, timeout=10)  # a clean stop: no send left behind
    assert dispatcher.in_flight == 0
