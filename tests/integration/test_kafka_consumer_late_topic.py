"""The executors' consumer reads a topic that its brokers' metadata named only after the
consumer had joined its group, within seconds, on Apache Kafka.

Found by tests/chaos/test_kafka_cluster_faults.py on a full run: replica a created the
runs topic, subscribed 40 ms later, and the broker that answered its metadata request
did not know the topic yet ("Topic … not found in cluster metadata"). Elected group
leader, a assigned with that metadata: every member got no partitions. aiokafka asks for
the metadata again only when it ages out (5 minutes by default), so the whole topic
delivered nothing that long and the sweeper claimed every run. Here the consumer joins
before the topic exists at all (the broker does not create topics on request), the topic
is created, and its record must be read within ``BOUND`` seconds."""

from __future__ import annotations

import time
import uuid

from aiokafka import AIOKafkaConsumer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from cronwire.adapters.kafka.consumer import ConsumerSettings
from cronwire.adapters.kafka.link import KafkaLink
from tests.support.apache_kafka import KafkaCluster
from tests.support.kafka import produce_one

BOUND = 20.0  # seconds; well under the 5-minute metadata age, above a loaded box's slack


async def _admin(bootstrap: str) -> AIOKafkaAdminClient:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=5000)
    await admin.start()
    return admin


async def _records(settings: ConsumerSettings, consumer: AIOKafkaConsumer,
                   within: float) -> int:
    """Records fetched as the executors fetch, within ``within`` seconds (0 if none)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        batches = await settings.fetch(consumer, 10)
        if batches:
            return sum(len(records) for records in batches.values())
    return 0


async def test_a_topic_unknown_when_the_group_formed_is_read_within_seconds(
    apache_kafka: KafkaCluster | str,
) -> None:
    bootstrap = apache_kafka if isinstance(apache_kafka, str) else apache_kafka.bootstrap
    topic = f"late-topic-{uuid.uuid4().hex[:8]}"
    settings = ConsumerSettings(group=f"group-{topic}")
    # Built exactly as the executors build theirs (the link is not started: the consumer
    # only reads its bootstrap list and request timeout).
    consumer = settings.consumer(KafkaLink(bootstrap, topic, 1))
    admin = await _admin(bootstrap)
    try:
        await consumer.start()
        consumer.subscribe([topic])
        # The group forms and assigns with metadata that does not name the topic.
        assert await _records(settings, consumer, within=3.0) == 0
        assert consumer.assignment() == set(), "an assignment for a topic that is not there"
        await admin.create_topics([NewTopic(topic, 1, 1)])
        await produce_one(bootstrap, topic)

        started = time.monotonic()
        records = await _records(settings, consumer, within=BOUND)
        waited = time.monotonic() - started
        print(f"\ntopic created after the group formed: {records} record(s) after {waited:.1f}s")
        assert records == 1, (
            f"{records} records in {waited:.1f}s after the topic was created (bound {BOUND}s;"
            f" assignment {sorted(map(str, consumer.assignment()))}): the consumer's metadata"
            " still lacked the topic")
    finally:
        await consumer.stop()
        try:
            await admin.delete_topics([topic])
        finally:
            await admin.close()
