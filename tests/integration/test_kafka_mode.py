"""Kafka mode's pieces on the real broker and real Postgres: keys claim, sweeper, outbox,
published_at resets, a lost and returning broker."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime
from uuid import UUID

import asyncpg
from aiokafka.partitioner import DefaultPartitioner

from cronwire.adapters.embedded.kafka import EmbeddedBroker
from cronwire.adapters.kafka.codec import decode_key, encode_key
from cronwire.adapters.memory import MemoryHints
from cronwire.adapters.postgres.claim_source import PostgresClaimSource
from cronwire.adapters.postgres.keyed_claims import PostgresKeyedClaims
from cronwire.adapters.postgres.outbox_store import PostgresOutboxStore
from cronwire.adapters.postgres.run_store import PostgresRunStore
from cronwire.domain.backlog import BACKLOG_KEYS_PER_TENANT
from cronwire.harness.seeding import (
    SeededSchedule,
    seed_due_run_ids,
    seed_due_runs,
    seed_schedule,
    seed_tenant,
)
from cronwire.service.outbox_relay import OutboxRelay
from tests.support.brokers import StandaloneKafka
from tests.support.kafka import kafka_mode
from tests.support.polling import wait_until

URL = "http://127.0.0.1:9/hook"


class _RecordingPublisher:
    """A broker that acknowledges every key and remembers what it was sent."""

    healthy = True

    def __init__(self) -> None:
        self.sent: list[tuple[UUID, object, UUID]] = []

    async def publish(self, runs):  # type: ignore[no-untyped-def]
        self.sent.extend(runs)
        return [(run_id, at) for run_id, at, _ in runs]


def _backlogged_relay(pool: asyncpg.Pool) -> tuple[
        OutboxRelay, list[tuple[UUID, object, UUID]], MemoryHints]:
    """A relay (0.2 s poll) beside a consumer whose one-key buffer is full, so backlogged,
    publishing to a recording broker: (relay, what it sent, the consumer)."""
    publisher = _RecordingPublisher()
    hints = MemoryHints(buffer_limit=1)
    hints.deliver([(uuid.uuid4(), datetime.now(UTC))])
    relay = OutboxRelay(PostgresOutboxStore(pool), publisher, hints=hints, poll_seconds=0.2)
    return relay, publisher.sent, hints


async def _schedule(pool: asyncpg.Pool):  # type: ignore[no-untyped-def]
    async with pool.acquire() as conn:
        return await seed_schedule(conn, await seed_tenant(conn), URL)


async def _schedules_off_partition_of(pool: asyncpg.Pool, tenant_id: UUID, count: int, *,
                                      partitions: int) -> list[SeededSchedule]:
    """``count`` schedules of fresh tenants whose keys land on another partition than
    ``tenant_id``'s (the producer's default partitioner, keyed by tenant id). Random tenants
    share the burst's partition about one time in four for three of twelve, and then their
    key waits behind the paused burst: that made this test fail now and then."""
    where = DefaultPartitioner()
    every = list(range(partitions))
    taken = where(tenant_id.bytes, every, every)
    found: list[SeededSchedule] = []
    for _ in range(20 * count):  # bounded: each try misses with probability 1/12
        schedule = await _schedule(pool)
        if where(schedule.tenant_id.bytes, every, every) != taken:
            found.append(schedule)
            if len(found) == count:
                return found
    raise AssertionError(f"no {count} tenants off partition {taken} in {20 * count} tries")


def test_a_key_round_trips_and_garbage_is_skipped() -> None:
    import uuid
    from datetime import UTC, datetime

    run_id, at = uuid.uuid4(), datetime(2027, 3, 28, 1, 0, 0, 123456, tzinfo=UTC)
    assert decode_key(encode_key(run_id, at)) == (run_id, at)
    assert decode_key(b"junk") is None and decode_key(None) is None


async def test_the_outbox_publishes_due_runs_only_and_marks_what_was_acknowledged(
    db_pool: asyncpg.Pool,
) -> None:
    schedule = await _schedule(db_pool)
    await seed_due_runs(db_pool, schedule, 4)  # type: ignore[arg-type]
    await seed_due_runs(db_pool, schedule, 2, first=100, due_seconds_ago=-60)  # type: ignore[arg-type]
    store = PostgresOutboxStore(db_pool)
    sent: list[object] = []

    async def ack_half(runs):  # type: ignore[no-untyped-def]
        sent.extend(runs)
        return [(run_id, at) for run_id, at, _ in runs[:2]]

    assert await store.publish_due(10, ack_half) == 2
    assert len(sent) == 4  # the two planned ahead were not sent: not due yet
    assert await db_pool.fetchval("SELECT count(*) FROM job_run WHERE published_at IS NOT NULL") == 2

    async def broken(_runs):  # type: ignore[no-untyped-def]
        raise RuntimeError("broker gone")

    try:
        await store.publish_due(10, broken)
    except RuntimeError:
        pass
    assert await db_pool.fetchval("SELECT count(*) FROM job_run WHERE published_at IS NOT NULL") == 2
    seconds = await store.seconds_until_unpublished_due()
    assert seconds is not None and seconds < 0


async def test_a_key_is_sent_only_once_its_run_is_committed_published_and_unlocked(
    db_pool: asyncpg.Pool,
) -> None:
    # The kafka burst measured it: the publisher used to send inside its transaction, so a
    # consumer that got a key first waited on the row's lock until the broker's ack and the
    # mark were committed (~0.2 s per 2,000-key pass), and the claim by key stalled with it.
    schedule = await _schedule(db_pool)
    await seed_due_runs(db_pool, schedule, 3)  # type: ignore[arg-type]
    store = PostgresOutboxStore(db_pool)
    seen: list[tuple[int, int]] = []

    async def look_from_elsewhere(runs):  # type: ignore[no-untyped-def]
        async with db_pool.acquire() as conn, conn.transaction():
            # NOWAIT: a row still locked by the publisher raises LockNotAvailableError.
            locked = await conn.fetch(
                "SELECT published_at FROM job_run WHERE id = ANY($1::uuid[]) FOR UPDATE NOWAIT",
                [run_id for run_id, _, _ in runs])
        seen.append((len(locked), sum(row["published_at"] is not None for row in locked)))
        return [(run_id, at) for run_id, at, _ in runs]

    assert await store.publish_due(10, look_from_elsewhere) == 3
    assert seen == [(3, 3)]


async def test_while_this_replicas_keys_are_backlogged_the_relay_publishes_only_fresh_runs(
    db_pool: asyncpg.Pool,
) -> None:
    # The kafka 100k burst: every key was published and marked, and most arrived after the
    # fair claim had taken the run (a mark, a message and a claim by key for nothing each).
    schedule = await _schedule(db_pool)
    await seed_due_runs(db_pool, schedule, 3, due_seconds_ago=30)  # type: ignore[arg-type]
    await seed_due_runs(db_pool, schedule, 2, first=100, due_seconds_ago=0.2)  # type: ignore[arg-type]
    relay, sent, hints = _backlogged_relay(db_pool)
    assert await relay.step() == 0.2 and len(sent) == 2  # the two fresh ones, then a pause
    assert await relay.step() == 0.2  # the older three wait: no spin on them
    assert len(sent) == 2
    hints.take(1)
    hints.acknowledge()  # caught up
    assert await relay.step() == 0.0 and len(sent) == 5
    assert await db_pool.fetchval("SELECT count(*) FROM job_run WHERE published_at IS NULL") == 0


async def test_while_backlogged_a_pass_publishes_each_tenants_share_of_fresh_runs(
    db_pool: asyncpg.Pool,
) -> None:
    # The kafka 100k burst, due at one instant: every run is fresh for a second, and the
    # relay published 2,000 keys a pass into the backlogged partition, most of them for
    # runs the fair claim had taken by the time their key was consumed (ADR 0051).
    burst, quiet = await _schedule(db_pool), await _schedule(db_pool)
    await seed_due_runs(db_pool, burst, BACKLOG_KEYS_PER_TENANT + 50,  # type: ignore[arg-type]
                        due_seconds_ago=0)
    await seed_due_runs(db_pool, quiet, 1, due_seconds_ago=0)  # type: ignore[arg-type]
    relay, sent, hints = _backlogged_relay(db_pool)
    assert await relay.step() == 0.2  # not at once: the share is per pass
    tenants = [tenant for _, _, tenant in sent]
    assert tenants.count(burst.tenant_id) == BACKLOG_KEYS_PER_TENANT
    assert tenants.count(quiet.tenant_id) == 1  # the quiet tenant's fresh run goes out now
    hints.take(1)
    hints.acknowledge()  # caught up: the rest go out at once
    assert await relay.step() == 0.0
    assert len(sent) == BACKLOG_KEYS_PER_TENANT + 1 + 50


async def test_runs_overdue_beyond_the_sweepers_grace_are_left_to_the_sweeper(
    db_pool: asyncpg.Pool,
) -> None:
    # The kafka 100k burst: keys published for runs already seconds overdue arrived after a
    # sweep had taken the run (54,000 marked, 43,000 claimed by key). Such a run is the
    # sweeper's anyway, so the relay no longer publishes it (ADR 0051).
    schedule = await _schedule(db_pool)
    old = await seed_due_run_ids(db_pool, schedule, 3, due_seconds_ago=30)  # type: ignore[arg-type]
    await seed_due_runs(db_pool, schedule, 2,  # type: ignore[arg-type]
                        first=100, due_seconds_ago=1)
    publisher = _RecordingPublisher()
    sent = publisher.sent

    relay = OutboxRelay(PostgresOutboxStore(db_pool), publisher, sweep_grace_seconds=5,
                        poll_seconds=0.2)
    assert await relay.step() == 0.0 and len(sent) == 2  # the two a second overdue
    assert await relay.step() == 0.2  # the old three are not a reason to spin
    assert len(sent) == 2
    swept = await PostgresKeyedClaims(db_pool).sweep("sweeper", 10, 30.0, 5.0)
    assert {run.id for run in swept.runs} == set(old)


async def test_keys_published_behind_a_paused_partition_count_as_its_backlog(
    db_pool: asyncpg.Pool, kafka_bootstrap: str
) -> None:
    # The kafka 100k burst: the burst's partition was paused (its buffer full) before most
    # of the burst was published, so no fetch brought its new high watermark; the relay,
    # reading "not backlogged", went on publishing the whole burst into it (ADR 0051).
    schedule = await _schedule(db_pool)
    await seed_due_runs(db_pool, schedule, 50)  # type: ignore[arg-type]
    async with kafka_mode(db_pool, kafka_bootstrap, buffer_limit=50, sweep_seconds=3600) as mode:
        await mode.settle()
        assert mode.hints.buffered == 50 and not mode.hints.backlogged  # full, none behind
        # In three passes: tansu answers a partition's end offset with the last record
        # batch's first offset + 1 (Apache Kafka with the true end), so one batch of 120
        # would look like one key behind there.
        for wave in range(3):
            await seed_due_runs(db_pool, schedule, 40,  # type: ignore[arg-type]
                                first=1000 + 40 * wave)
            await mode.relay.step()
        assert mode.relay.published == 170
        await wait_until(lambda: mode.hints.backlogged, within=10)
        assert mode.hints.buffered == 50  # still paused: it was asked, not fetched


async def test_the_outbox_publishes_each_due_tenants_oldest_keys_in_turn(
    db_pool: asyncpg.Pool,
) -> None:
    # The chaos fairness fault found it: publishing oldest-first, a 3,000-run burst due a
    # minute ago went out before any key of a tenant due a second ago, so in kafka mode the
    # small tenants waited for the whole burst's publication (about 2 s at 50,000 runs).
    noisy = await _schedule(db_pool)
    await seed_due_runs(db_pool, noisy, 3000, due_seconds_ago=60)  # type: ignore[arg-type]
    quiet = [await _schedule(db_pool) for _ in range(3)]
    for schedule in quiet:
        await seed_due_runs(db_pool, schedule, 2)  # type: ignore[arg-type]
    store = PostgresOutboxStore(db_pool)
    batches: list[list[UUID]] = []

    async def ack_all(runs):  # type: ignore[no-untyped-def]
        batches.append([tenant_id for _, _, tenant_id in runs])
        return [(run_id, at) for run_id, at, _ in runs]

    # Four tenants due: each may lock up to 2 x 100 / 4 = 50 keys of a pass.
    assert await store.publish_due(100, ack_all) == 56
    first = batches[0]
    assert all(first.count(s.tenant_id) == 2 for s in quiet)  # both of each quiet tenant's
    assert first.count(noisy.tenant_id) == 50
    while await store.publish_due(500, ack_all):  # bounded: 3,006 keys in all
        pass
    assert sum(len(batch) for batch in batches) == 3006
    assert await db_pool.fetchval("SELECT count(*) FROM job_run WHERE published_at IS NULL") == 0
    assert await store.seconds_until_unpublished_due() is None
    await seed_due_runs(db_pool, quiet[0], 1, first=500, due_seconds_ago=-30)  # type: ignore[arg-type]
    seconds = await store.seconds_until_unpublished_due()
    assert seconds is not None and 25 < seconds <= 30


async def test_a_released_or_retried_run_is_published_again(db_pool: asyncpg.Pool) -> None:
    schedule = await _schedule(db_pool)
    await seed_due_runs(db_pool, schedule, 2)  # type: ignore[arg-type]
    await db_pool.execute("UPDATE job_run SET published_at = now()")
    runs = (await PostgresClaimSource(db_pool).claim("a", 2, 30)).runs
    released = await PostgresRunStore(db_pool).release("a", [
        (r.id, r.scheduled_for, r.lease_generation) for r in runs])
    assert released == 2
    assert await db_pool.fetchval("SELECT count(*) FROM job_run WHERE published_at IS NULL") == 2


async def test_published_batches_land_where_the_default_partitioner_puts_each_tenant_in_order(
    db_pool: asyncpg.Pool, kafka_bootstrap: str
) -> None:
    # Keys go out as record batches, one per partition, instead of one send() each: they
    # must still land on the partition send() would have picked, in the order given.
    import uuid
    from datetime import UTC, datetime, timedelta

    from aiokafka import AIOKafkaConsumer

    tenants = [uuid.uuid4() for _ in range(6)]
    base = datetime(2026, 12, 1, tzinfo=UTC)
    runs = [(uuid.uuid4(), base + timedelta(seconds=i), tenants[i % 6]) for i in range(3000)]
    async with kafka_mode(db_pool, kafka_bootstrap, partitions=12) as mode:
        acked = await mode.publisher.publish(runs)
        assert acked == [(run_id, at) for run_id, at, _ in runs]
        consumer = AIOKafkaConsumer(mode.link.topic, bootstrap_servers=kafka_bootstrap,
                                    auto_offset_reset="earliest", enable_auto_commit=False)
        await consumer.start()
        try:
            seen: list[tuple[int, bytes, bytes]] = []
            async with asyncio.timeout(20):
                while len(seen) < len(runs):
                    for tp, messages in (await consumer.getmany(timeout_ms=200)).items():
                        seen.extend((tp.partition, m.key, m.value) for m in messages)
        finally:
            await consumer.stop()
    every = list(range(12))
    where = DefaultPartitioner()
    assert all(partition == where(key, every, every) for partition, key, _ in seen)
    for tenant in tenants:  # one tenant, one partition: its keys in publishing order
        got = [decode_key(value) for _, key, value in seen if key == tenant.bytes]
        assert got == [(run_id, at) for run_id, at, t in runs if t == tenant]


async def test_keys_of_runs_claimed_elsewhere_are_dropped_and_acknowledged(
    db_pool: asyncpg.Pool, kafka_bootstrap: str
) -> None:
    schedule = await _schedule(db_pool)
    await seed_due_runs(db_pool, schedule, 6)  # type: ignore[arg-type]
    async with kafka_mode(db_pool, kafka_bootstrap, sweep_seconds=3600) as mode:
        assert await mode.settle() == 6
        taken = (await PostgresClaimSource(db_pool).claim("postgres-replica", 4, 30)).runs
        assert len(taken) == 4
        batch = await mode.source.claim("kafka-replica", 10, 30)
        runs = batch.runs
        assert len(runs) == 2 and batch.sources == (("kafka", 2),)
        assert {r.id for r in runs}.isdisjoint({r.id for r in taken})
        assert mode.hints.take(10) == []  # every key was taken and settled


async def test_the_sweeper_claims_a_run_no_message_delivered_after_the_grace(
    db_pool: asyncpg.Pool, kafka_bootstrap: str
) -> None:
    schedule = await _schedule(db_pool)
    # Marked published, but the key never reached the broker (a lost message).
    await seed_due_runs(db_pool, schedule, 1, due_seconds_ago=10)  # type: ignore[arg-type]
    await seed_due_runs(db_pool, schedule, 1, first=10, due_seconds_ago=1)  # type: ignore[arg-type]
    await db_pool.execute("UPDATE job_run SET published_at = now()")
    async with kafka_mode(db_pool, kafka_bootstrap, grace_seconds=5, sweep_seconds=0) as mode:
        batch = await mode.source.claim("a", 10, 30)
        assert len(batch.runs) == 1 and batch.sources == (("sweeper", 1),)
        assert (await mode.source.claim("a", 10, 30)).runs == ()  # the other is within its grace


async def test_a_lost_broker_degrades_to_the_sweeper_and_recovers_without_a_restart(
    db_pool: asyncpg.Pool, own_kafka: EmbeddedBroker | StandaloneKafka
) -> None:
    broker = own_kafka
    broker.start()
    try:
        async with kafka_mode(db_pool, broker.bootstrap, probe_seconds=0.3, sweep_seconds=3600) as mode:
            schedule = await _schedule(db_pool)
            await asyncio.to_thread(broker.stop)  # Apache Kafka takes seconds to stop

            async def down() -> bool:
                return not mode.link.healthy

            await wait_until(down, within=30.0)
            await seed_due_runs(db_pool, schedule, 3)  # type: ignore[arg-type]
            batch = await mode.source.claim("a", 10, 30)
            assert len(batch.runs) == 3 and batch.sources == (("sweeper", 3),)  # polling, no grace
            generation = mode.link.generation
            await asyncio.to_thread(broker.start)  # tansu: memory storage, the topic is gone; Apache: it is kept

            async def up() -> bool:
                return mode.link.healthy

            await wait_until(up, within=30.0)
            assert mode.link.generation > generation
            await seed_due_runs(db_pool, schedule, 2, first=10)  # type: ignore[arg-type]
            assert await mode.settle() == 2
            again = await mode.source.claim("a", 10, 30)
            assert len(again.runs) == 2 and again.sources == (("kafka", 2),)
    finally:
        broker.stop()


async def test_one_tenants_burst_on_its_partition_does_not_hold_back_other_tenants_keys(
    db_pool: asyncpg.Pool, kafka_bootstrap: str
) -> None:
    # The topic is keyed by tenant: a 600-run burst sits on one partition. Keys of three
    # quiet tenants (chosen on other partitions of twelve) must come out in the
    # very first small take, not after the burst's keys.
    noisy = await _schedule(db_pool)
    await seed_due_runs(db_pool, noisy, 600)  # type: ignore[arg-type]
    async with kafka_mode(db_pool, kafka_bootstrap, buffer_limit=50, partitions=12,
                          sweep_seconds=3600) as mode:
        while mode.relay.published < 600:  # the burst's keys are published first
            await mode.relay.step()
        quiet = await _schedules_off_partition_of(db_pool, noisy.tenant_id, 3, partitions=12)
        for schedule in quiet:
            await seed_due_runs(db_pool, schedule, 1)  # type: ignore[arg-type]
        while True:  # publish the quiet keys too
            before = mode.relay.published
            await mode.relay.step()
            if mode.relay.published == before:
                break
        # The burst's partition stops at its buffer's 50 keys (paused); the others go on.
        async with asyncio.timeout(20):
            while mode.hints.delivered < 50 + 3:  # noqa: ASYNC110 - a counter
                await asyncio.sleep(0.02)
        keys = mode.hints.take(10)
        ids = {run_id for run_id, _ in keys}
        quiet_runs = await db_pool.fetch(
            "SELECT id FROM job_run WHERE schedule_id = ANY($1::uuid[])",
            [s.id for s in quiet])
        assert ids & {r["id"] for r in quiet_runs}
