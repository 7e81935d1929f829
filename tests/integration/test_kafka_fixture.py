"""The session broker fixture gives a real Kafka-wire broker (tansu unless configured)."""

from __future__ import annotations

import asyncio
import uuid

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic


async def test_broker_round_trips_keyed_messages_through_a_consumer_group(
    kafka_bootstrap: str,
) -> None:
    topic = f"fixture-{uuid.uuid4().hex[:8]}"
    admin = AIOKafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=1)])
    finally:
        await admin.close()
    producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, enable_idempotence=False)
    await producer.start()
    try:
        for i in range(20):
            await producer.send_and_wait(topic, f"run-{i}".encode(), key=f"tenant-{i % 4}".encode())
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(
        topic, bootstrap_servers=kafka_bootstrap, group_id=f"g-{topic}",
        auto_offset_reset="earliest", enable_auto_commit=False,
    )
    await consumer.start()
    received: dict[bytes, set[int]] = {}
    values: set[bytes] = set()
    try:
        async with asyncio.timeout(30):
            while len(values) < 20:
                batches = await consumer.getmany(timeout_ms=500)
                for partition, messages in batches.items():
                    for message in messages:
                        assert message.key is not None
                        received.setdefault(message.key, set()).add(partition.partition)
                        values.add(message.value or b"")
        await consumer.commit()
    finally:
        await consumer.stop()
    # Keyed by tenant: every tenant's messages land on exactly one partition.
    assert len(received) == 4 and all(len(parts) == 1 for parts in received.values())
