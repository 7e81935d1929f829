"""Kafka mode's topic and producer settings against the brokers themselves: the topic is
found or created through the admin API (partitions, replication factor), a topic the
broker will not create is one clear start-up error, a topic with fewer partitions than
configured is used as it is, and the producer is idempotent exactly where the broker
grants producer ids (Apache Kafka: yes; tansu: no)."""

from __future__ import annotations

import contextlib
import logging
import uuid
from collections.abc import AsyncIterator

import asyncpg
import pytest
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from cronwire.adapters.kafka.capabilities import grants_producer_ids
from cronwire.adapters.kafka.link import KafkaLink
from cronwire.adapters.kafka.metadata import MetadataProbe
from cronwire.domain.errors import ConfigError
from cronwire.harness.seeding import seed_due_runs, seed_schedule, seed_tenant
from tests.support.apache_kafka import KafkaCluster
from tests.support.kafka import KafkaMode, kafka_mode
from tests.support.polling import wait_until

URL = "http://127.0.0.1:9/hook"


def _topic() -> str:
    return f"settings-{uuid.uuid4().hex[:10]}"


async def _describe(bootstrap: str, topic: str) -> list[dict[str, object]]:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        [described] = await admin.describe_topics([topic])
    finally:
        await admin.close()
    partitions: list[dict[str, object]] = described["partitions"]
    return partitions


async def _create(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])
    finally:
        await admin.close()


@contextlib.asynccontextmanager
async def _published(pool: asyncpg.Pool, bootstrap: str, count: int = 3,
                     topic: str | None = None) -> AsyncIterator[KafkaMode]:
    """Kafka mode after ``count`` due runs were published, received and claimed by key."""
    async with pool.acquire() as conn:
        schedule = await seed_schedule(conn, await seed_tenant(conn), URL)
        await seed_due_runs(conn, schedule, count)
    async with kafka_mode(pool, bootstrap, sweep_seconds=3600, topic=topic) as mode:
        assert await mode.settle() == count
        claimed = await mode.claim_keys(count)
        assert len(claimed.runs) == count and claimed.sources == (("kafka", count),)
        yield mode


async def test_apache_kafka_grants_producer_ids_and_the_publisher_is_idempotent(
    db_pool: asyncpg.Pool, apache_kafka: KafkaCluster | str
) -> None:
    bootstrap = apache_kafka if isinstance(apache_kafka, str) else apache_kafka.bootstrap
    assert await grants_producer_ids(bootstrap) is True
    async with _published(db_pool, bootstrap) as mode:
        assert mode.link.idempotent and mode.publisher.idempotent


async def test_tansu_grants_no_producer_id_and_the_publisher_stays_plain(
    db_pool: asyncpg.Pool, tansu_bootstrap: str
) -> None:
    assert await grants_producer_ids(tansu_bootstrap) is False
    async with _published(db_pool, tansu_bootstrap) as mode:
        assert not mode.link.idempotent and not mode.publisher.idempotent


async def test_a_missing_topic_is_created_with_replication_three_on_a_three_node_cluster(
    apache_kafka_cluster: KafkaCluster,
) -> None:
    # The cluster is shared with fault tests: a broker they restarted may not be back in
    # the metadata yet, and then the default is rightly the brokers there are (CI saw 2).
    probe = MetadataProbe(apache_kafka_cluster.bootstrap, 10_000)

    async def three_brokers_listed() -> bool:
        return len((await probe.fetch()).get("brokers") or []) == 3

    await wait_until(three_brokers_listed, within=120, every=0.5)
    topic = _topic()
    link = KafkaLink(apache_kafka_cluster.bootstrap, topic, 4)
    await link.start()
    try:
        assert link.layout is not None and link.layout.created
        assert link.layout.replication_factor == 3
    finally:
        await link.close()
    # The broker that answers the describe may learn of the new topic a moment after the
    # controller created it (CI saw an empty answer once): ask until it knows.
    partitions: list[dict[str, object]] = []

    async def described() -> bool:
        nonlocal partitions
        partitions = await _describe(apache_kafka_cluster.bootstrap, topic)
        return bool(partitions)

    await wait_until(described, within=30, every=0.5)
    assert len(partitions) == 4
    assert all(len(p["replicas"]) == 3 for p in partitions)  # type: ignore[arg-type]


async def test_the_default_replication_factor_is_capped_by_the_brokers_there_are(
    kafka_bootstrap: str,
) -> None:
    topic = _topic()
    link = KafkaLink(kafka_bootstrap, topic, 3)
    await link.start()
    try:
        assert link.layout is not None and link.layout.replication_factor == 1  # one broker
    finally:
        await link.close()
    assert len(await _describe(kafka_bootstrap, topic)) == 3


async def test_a_topic_the_broker_refuses_to_create_is_one_clear_start_up_error(
    apache_kafka: KafkaCluster | str,
) -> None:
    """Replication factor 3 on one broker: INVALID_REPLICATION_FACTOR, at once (no retry
    loop: a refusal does not go away by waiting)."""
    bootstrap = apache_kafka if isinstance(apache_kafka, str) else apache_kafka.bootstrap
    topic = _topic()
    link = KafkaLink(bootstrap, topic, 3, replication_factor=3)
    with pytest.raises(ConfigError) as refused:
        await link.start(within=60)
    await link.close()
    message = str(refused.value)
    assert message.startswith("SCHEDULER_KAFKA_TOPIC: ") and "\n" not in message
    assert topic in message and "InvalidReplicationFactor" in message
    assert "replication factor 3" in message


async def test_an_existing_topic_with_fewer_partitions_is_used_as_it_is(
    db_pool: asyncpg.Pool, kafka_bootstrap: str, caplog: pytest.LogCaptureFixture
) -> None:
    topic = _topic()
    await _create(kafka_bootstrap, topic, 2)
    link = KafkaLink(kafka_bootstrap, topic, 6)
    with caplog.at_level(logging.WARNING, logger="cronwire.adapters.kafka.topic"):
        await link.start()
    try:
        assert link.layout is not None
        assert (link.layout.partitions, link.layout.created) == (2, False)
    finally:
        await link.close()
    assert "has 2 partitions, fewer than SCHEDULER_KAFKA_PARTITIONS=6" in caplog.text
    async with _published(db_pool, kafka_bootstrap, count=6, topic=topic):
        pass  # kafka mode works on it
    assert len(await _describe(kafka_bootstrap, topic)) == 2  # no partition was added
