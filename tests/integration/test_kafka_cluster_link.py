"""The broker link on a 3-node Apache Kafka cluster: one broker that accepts connections
but never answers (SIGSTOP) must not make the whole cluster look lost — the link would
stop every consumer and claim by sweeper only while two brokers serve (found by
tests/chaos/test_kafka_cluster_faults.py)."""

from __future__ import annotations

import asyncio
import time
import uuid

from cronwire.adapters.kafka.link import KafkaLink
from tests.support.apache_kafka import KafkaCluster


async def test_one_frozen_broker_does_not_make_the_cluster_look_lost(
    apache_kafka_cluster: KafkaCluster | str,
) -> None:
    assert isinstance(apache_kafka_cluster, KafkaCluster)
    cluster = apache_kafka_cluster
    changes: list[bool] = []
    link = KafkaLink(cluster.bootstrap, f"link-{uuid.uuid4().hex[:8]}", 3, probe_seconds=0.3,
                     request_timeout_ms=2000, on_change=changes.append)
    await link.start()
    first = cluster.nodes[0]  # the first bootstrap server: the one the link asks first
    try:
        first.freeze()
        deadline = time.monotonic() + 8.0  # several probes, each meeting the frozen broker
        while time.monotonic() < deadline:
            assert link.healthy, "one frozen broker of three made the link declare it lost"
            await asyncio.sleep(0.2)
    finally:
        first.thaw()
        await link.close()
    assert changes == [True]
