"""The executors' consumer finds a partition's new leader within seconds, on a 3-node
Apache Kafka cluster.

Found by tests/chaos/test_kafka_cluster_faults.py (a broker frozen and thawed): a
partition whose position had to be reset (no committed offset, or a seek) asked its old
leader — still up, now a follower — for the offset, got NotLeaderForPartition, and asked
it again every 100 ms: aiokafka refreshes its metadata on that error when fetching, but
not when listing offsets (Java's consumer had the same bug, KAFKA-9535). The partition then
delivered nothing until the metadata aged out (5 minutes by default), and the sweeper
claimed its runs. Here the leader moves while the broker that led stays up, the consumer
seeks back, and the record must come again within ``BOUND`` seconds."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from pathlib import Path

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from cronwire.adapters.kafka.consumer import ConsumerSettings
from cronwire.adapters.kafka.link import KafkaLink
from tests.support.apache_kafka import LEADER_ELECTION, KafkaCluster
from tests.support.kafka import produce_one
from tests.support.polling import wait_until

BOUND = 20.0  # seconds; well under the 5-minute metadata age, above a loaded box's slack
REASSIGN = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"


async def _partition(bootstrap: str, topic: str) -> dict[str, object]:
    """The topic's one partition as a broker describes it (leader, replicas, isr)."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=5000)
    await admin.start()
    try:
        [described] = await admin.describe_topics([topic])
    finally:
        await admin.close()
    partitions = described["partitions"]
    return dict(partitions[0]) if len(partitions) == 1 else {}  # {}: not known yet


async def _create(bootstrap: str, topic: str, replicas: list[int]) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=5000)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, -1, -1, replica_assignments={0: replicas})])
    finally:
        await admin.close()


async def _delete(bootstrap: str, topic: str) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=5000)
    await admin.start()
    try:
        await admin.delete_topics([topic])
    finally:
        await admin.close()


async def _read(settings: ConsumerSettings, consumer: AIOKafkaConsumer, tp: TopicPartition,
                within: float) -> int:
    """The records of ``tp`` in the first batch, fetched as the executors fetch (within
    ``within`` seconds; 0 if none came)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        batches = await settings.fetch(consumer, 10)
        if batches.get(tp):
            return len(batches[tp])
    return 0


async def _lead(cluster: KafkaCluster, topic: str, replicas: list[int], tmp: Path) -> None:
    """Move the partition's leadership to ``replicas[0]`` while every broker stays up:
    reorder its replicas, then a preferred-leader election (what an operator's rebalance
    or a thawed broker's return does to a consumer's cached leader)."""
    plan = tmp / "reassign.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "replicas": replicas}]}), encoding="utf-8")
    await asyncio.to_thread(cluster.tool, REASSIGN, "--reassignment-json-file", str(plan),
                            "--execute")

    async def reordered() -> bool:
        return (await _partition(cluster.bootstrap, topic))["replicas"] == replicas

    await wait_until(reordered, within=30, every=0.2)
    await asyncio.to_thread(cluster.tool, LEADER_ELECTION, "--election-type", "PREFERRED",
                            "--topic", topic, "--partition", "0")

    async def led() -> bool:
        return (await _partition(cluster.bootstrap, topic))["leader"] == replicas[0]

    await wait_until(led, within=30, every=0.2,
                     saw=lambda: _partition(cluster.bootstrap, topic))


async def test_a_partition_whose_leader_moved_is_read_again_within_seconds(
    apache_kafka_cluster: KafkaCluster | str, tmp_path: Path,
) -> None:
    assert isinstance(apache_kafka_cluster, KafkaCluster)
    cluster = apache_kafka_cluster
    first, second, third = (node.node_id for node in cluster.nodes)
    topic = f"leader-move-{uuid.uuid4().hex[:8]}"
    tp = TopicPartition(topic, 0)
    await _create(cluster.bootstrap, topic, [first, second, third])
    consumer: AIOKafkaConsumer | None = None
    try:
        await wait_until(lambda: _partition(cluster.bootstrap, topic), within=30)
        await produce_one(cluster.bootstrap, topic)
        # Built exactly as the executors build theirs (the link is not started: the
        # consumer only reads its bootstrap list and request timeout).
        settings = ConsumerSettings(group=f"group-{topic}")
        consumer = settings.consumer(KafkaLink(cluster.bootstrap, topic, 1))
        await consumer.start()
        consumer.assign([tp])
        assert await _read(settings, consumer, tp, within=30) == 1, "the record was not read"
        consumer.pause(tp)  # no fetch goes out: the cached leader stays the old one
        await _lead(cluster, topic, [second, first, third], tmp_path)

        started = time.monotonic()
        consumer.resume(tp)
        # Its position is reset: the offset is asked of the leader. The seek waits for
        # that up to the request timeout (11 s), and says whether it came; meanwhile the
        # consumer is polled, as the executors poll it.
        seek = asyncio.ensure_future(consumer.seek_to_beginning(tp))
        records = await _read(settings, consumer, tp, within=BOUND)
        waited = time.monotonic() - started
        reset = await seek
        print(f"\nleader {first} -> {second}: {records} record(s) after {waited:.1f}s"
              f" (position reset within the seek's wait: {reset})")
        assert records == 1, (
            f"{records} records in {waited:.1f}s after the leader moved from node {first} "
            f"to {second} (bound {BOUND}s; position reset within the seek's wait: {reset}): "
            f"the consumer kept asking node {first} for the partition's offsets")
    finally:
        if consumer is not None:
            await consumer.stop()
        await _delete(cluster.bootstrap, topic)
