"""Kafka mode's pieces on the real broker and real Postgres: keys claim, sweeper, where
published keys land, a backlog behind a paused partition, a lost and returning broker.
The outbox's own rules are in test_kafka_outbox.py."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime
from uuid import UUID

import asyncpg
from aiokafka.partitioner import DefaultPartitioner

from cronwire.adapters.embedded.kafka import EmbeddedBroker
from cronwire.adapters.kafka.codec import decode_key, encode_key
from cronwire.adapters.postgres.claim_source import PostgresClaimSource
from cronwire.harness.seeding import SeededSchedule, seed_due_runs
from tests.support.brokers import StandaloneKafka
from tests.support.kafka import kafka_mode, new_schedule
from tests.support.polling import wait_until
from tests.support.secrets import secret_box


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
        schedule = await new_schedule(pool)
        if where(schedule.tenant_id.bytes, every, every) != taken:
            found.append(schedule)
            if len(found) == count:
                return found
    raise AssertionError(f"no {count} tenants off partition {taken} in {20 * count} tries")


def test_a_key_round_trips_and_garbage_is_skipped() -> None:

    run_id, at = uuid.uuid4(), datetime(2027, 3, 28, 1, 0, 0, 123456, tzinfo=UTC)
    assert decode_key(encode_key(run_id, at)) == (run_id, at)
    assert decode_key(b"junk") is None and decode_key(None) is None


async def test_keys_published_behind_a_paused_partition_count_as_its_backlog(
    db_pool: asyncpg.Pool, kafka_bootstrap: str
) -> None:
    # The kafka 100k burst: the burst's partition was paused (its buffer full) before most
    # of the burst was published, so no fetch brought its new high watermark; the relay,
    # reading "not backlogged", went on publishing the whole burst into it (ADR 0063).
    schedule = await new_schedule(db_pool)
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


async def test_published_batches_land_where_the_default_partitioner_puts_each_tenant_in_order(
    db_pool: asyncpg.Pool, kafka_bootstrap: str
) -> None:
    # Keys go out as record batches, one per partition, instead of one send() each: they
    # must still land on the partition send() would have picked, in the order given.
    from datetime import timedelta

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
    schedule = await new_schedule(db_pool)
    await seed_due_runs(db_pool, schedule, 6)  # type: ignore[arg-type]
    async with kafka_mode(db_pool, kafka_bootstrap, sweep_seconds=3600) as mode:
        assert await mode.settle() == 6
        taken = (await PostgresClaimSource(db_pool, secret_box(db_pool)).claim("postgres-replica", 4, 30)).runs
        assert len(taken) == 4
        batch = await mode.source.claim("kafka-replica", 10, 30)
        runs = batch.runs
        assert len(runs) == 2 and batch.sources == (("kafka", 2),)
        assert {r.id for r in runs}.isdisjoint({r.id for r in taken})
        assert mode.hints.take(10) == []  # every key was taken and settled


async def test_the_sweeper_claims_a_run_no_message_delivered_after_the_grace(
    db_pool: asyncpg.Pool, kafka_bootstrap: str
) -> None:
    schedule = await new_schedule(db_pool)
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
            schedule = await new_schedule(db_pool)
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
            again = await mode.claim_keys(2)
            assert len(again.runs) == 2 and again.sources == (("kafka", 2),)
    finally:
        broker.stop()


async def test_one_tenants_burst_on_its_partition_does_not_hold_back_other_tenants_keys(
    db_pool: asyncpg.Pool, kafka_bootstrap: str
) -> None:
    # The topic is keyed by tenant: a 600-run burst sits on one partition. Keys of three
    # quiet tenants (chosen on other partitions of twelve) must come out in the
    # very first small take, not after the burst's keys.
    noisy = await new_schedule(db_pool)
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
