"""A malformed run-key message cannot stop a replica. The decoder is
total; an unreadable message is counted, skipped and its offset committed; entries are
queued only once read; the consumer task is supervised (restarted, reported while down);
and a fleet of two kafka-mode replicas fed poison on every partition keeps delivering."""

from __future__ import annotations

import asyncio
import struct
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg
import pytest
from aiokafka import AIOKafkaProducer
from hypothesis import given
from hypothesis import strategies as st

from cronwire.adapters.kafka.codec import (
    MALFORMED,
    OUT_OF_RANGE,
    UNKNOWN_VERSION,
    encode_key,
    read_run_key,
)
from cronwire.adapters.kafka.hints import KafkaRunHints
from cronwire.adapters.kafka.link import KafkaLink
from cronwire.domain.model import ClaimBatch
from cronwire.harness.seeding import (
    non_terminal,
    seed_due_runs,
    seed_schedule,
    seed_tenant,
    status_counts,
)
from cronwire.harness.sink import Sink
from tests.support.kafka import FAST_GROUP, kafka_mode
from tests.support.polling import wait_until
from tests.support.replicas import ReplicaSet

RUN = uuid.UUID("00000000-0000-4000-8000-000000000001")
POISON = [
    struct.pack(">B16sq", 1, RUN.bytes, 2**63 - 1),  # a time no datetime holds (OverflowError)
    struct.pack(">B16sq", 1, RUN.bytes, -(2**63)),
    struct.pack(">B16sq", 9, RUN.bytes, 0),  # a version this replica cannot read
    b"\x01abc",  # too short
    b"",
    None,  # a tombstone
]


def test_the_run_key_decoder_classifies_what_it_cannot_read() -> None:
    at = datetime(2027, 3, 28, 1, 0, 0, 123456, tzinfo=UTC)
    assert read_run_key(encode_key(RUN, at)) == (RUN, at)
    assert [read_run_key(value) for value in POISON] == [
        OUT_OF_RANGE, OUT_OF_RANGE, UNKNOWN_VERSION, MALFORMED, MALFORMED, MALFORMED]


@given(st.one_of(st.none(), st.binary(max_size=64),
                 st.builds(lambda v, micros: struct.pack(">B16sq", v, RUN.bytes, micros),
                           st.integers(0, 255), st.integers(-(2**63), 2**63 - 1))))
def test_the_run_key_decoder_is_total(value: bytes | None) -> None:
    key = read_run_key(value)
    assert key in (MALFORMED, UNKNOWN_VERSION, OUT_OF_RANGE) or (
        isinstance(key, tuple) and key[0] == uuid.UUID(bytes=value[1:17]))  # type: ignore[index]


async def _publish(bootstrap: str, topic: str, values: list[bytes | None], *,
                   partition: int | None = None) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    try:
        for value in values:
            await producer.send_and_wait(topic, value=value, key=b"tenant",
                                         partition=partition)
    finally:
        await producer.stop()


async def _schedule(pool: asyncpg.Pool, url: str = "http://127.0.0.1:9/hook") -> Any:
    async with pool.acquire() as conn:
        return await seed_schedule(conn, await seed_tenant(conn), url)


async def test_poison_is_skipped_counted_and_committed_and_good_keys_still_flow(
    db_pool: asyncpg.Pool, kafka_bootstrap: str
) -> None:
    schedule = await _schedule(db_pool)
    await seed_due_runs(db_pool, schedule, 3)
    async with kafka_mode(db_pool, kafka_bootstrap, sweep_seconds=3600, partitions=1) as mode:
        await _publish(kafka_bootstrap, mode.link.topic, POISON)
        assert await mode.settle() == 3  # the three real keys arrive behind the poison
        batch = await mode.claim_keys(3)
        assert len(batch.runs) == 3 and batch.sources == (("kafka", 3),)
        assert mode.hints.skipped == len(POISON) and mode.hints.consuming
        await _publish(kafka_bootstrap, mode.link.topic, POISON[:2])  # only poison behind
        await wait_until(lambda: mode.hints.skipped == len(POISON) + 2, within=30)
        assert await mode.source.claim("a", 10, 30) == ClaimBatch()  # takes and settles the poison
        await wait_until(lambda: not mode.hints._keys.has_settled(), within=10)  # committed
        topic, group = mode.link.topic, f"group-{mode.link.topic}"
    # A new member of the group starts after the committed offsets: nothing is re-read.
    again = KafkaLink(kafka_bootstrap, topic, 1, probe_seconds=0.5, request_timeout_ms=3000)
    await again.start()
    fresh = KafkaRunHints(again, group, **FAST_GROUP)
    await fresh.start()
    try:
        await _publish(kafka_bootstrap, topic, [encode_key(RUN, datetime.now(UTC))])
        await wait_until(lambda: fresh.delivered >= 1, within=30)
        assert fresh.delivered == 1 and fresh.skipped == 0, (fresh.delivered, fresh.skipped)
    finally:
        await fresh.close()
        await again.close()


async def test_a_failed_consumer_task_is_restarted_and_reported_meanwhile(
    db_pool: asyncpg.Pool, kafka_bootstrap: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    schedule = await _schedule(db_pool)
    async with kafka_mode(db_pool, kafka_bootstrap, sweep_seconds=3600) as mode:
        hints = mode.hints
        original = hints._fetch
        failed = asyncio.Event()

        async def fail_once(consumer: Any, limit: int) -> Any:
            if not failed.is_set():
                failed.set()
                raise RuntimeError("a bug the consumer task did not expect")
            return await original(consumer, limit)

        monkeypatch.setattr(hints, "_fetch", fail_once)
        await asyncio.wait_for(failed.wait(), 30)
        await wait_until(lambda: hints.restarts == 1, within=10)
        await wait_until(lambda: hints.consuming and hints.healthy, within=30)
        await seed_due_runs(db_pool, schedule, 2)
        assert await mode.settle() == 2
        assert len((await mode.claim_keys(2)).runs) == 2


@pytest.fixture
async def sink() -> AsyncIterator[Sink]:
    async with Sink() as running:
        yield running


@pytest.mark.slow
async def test_two_kafka_replicas_fed_poison_on_every_partition_keep_delivering(
    db_pool: asyncpg.Pool, database_url: str, kafka_bootstrap: str, sink: Sink, tmp_path: Path
) -> None:
    partitions = 4
    topic = f"runs-{uuid.uuid4().hex[:10]}"
    settings = dict(claim_source="kafka", kafka_bootstrap_servers=kafka_bootstrap,
                    kafka_topic=topic, kafka_consumer_group=f"group-{topic}",
                    kafka_partitions=partitions, kafka_sweep_grace_seconds=60)
    async with ReplicaSet(database_url, log_dir=tmp_path) as fleet:
        replicas = [await fleet.spawn(name, **settings) for name in ("a", "b")]
        for partition in range(partitions):
            await _publish(kafka_bootstrap, topic, POISON, partition=partition)
        schedules = [await _schedule(db_pool, sink.url) for _ in range(8)]
        for schedule in schedules:
            await seed_due_runs(db_pool, schedule, 25)
        # The runs are delivered by message (the sweeper's grace is 60 s), by both
        # replicas, which are still running.
        await sink.wait_for(lambda s: s.unique >= 200, within=60)
        assert await _settles(db_pool)
        assert await status_counts(db_pool) == {"succeeded": 200}
        skipped = 0.0
        for replica in replicas:
            assert replica.running, replica.log()[-3000:]
            async with aiohttp.ClientSession() as http, http.get(
                    f"{replica.base_url}/readyz") as response:
                assert response.status == 200, await response.text()
            metrics = await replica.metrics()
            skipped += sum(value for name, value in metrics.items()
                           if name.startswith("scheduler_kafka_messages_skipped_total"))
        # Every poison message was skipped; one read again after a rebalance moved its
        # partition before the skip was committed is counted again (at-least-once reads).
        assert partitions * len(POISON) <= skipped <= 2 * partitions * len(POISON), skipped


async def _settles(pool: asyncpg.Pool) -> bool:
    async def settled() -> bool:
        return await non_terminal(pool) == 0

    for _ in range(100):
        if await settled():
            return True
        await asyncio.sleep(0.1)
    return False
