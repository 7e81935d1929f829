"""The executors' consumer: how it is configured, and how long its calls may take.

aiokafka's fetch and commit can wait for ever when the broker goes away under them (a
fetch during a rebalance, a commit looking for its coordinator), so both are bounded by
the session timing the consumer was configured with.
"""

from __future__ import annotations

import asyncio
import time
import weakref
from dataclasses import dataclass
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition

from cronwire.adapters.kafka.link import KafkaLink

# A partition without a position this long has asked a broker that is no longer its
# leader, and a subscribed topic missing from the metadata this long was created after
# the group formed (see ``_refresh_stale_metadata``); either normally takes one round trip.
STUCK_RESET_SECONDS = 1.0
_stuck_since: weakref.WeakKeyDictionary[AIOKafkaConsumer, float] = weakref.WeakKeyDictionary()


@dataclass(frozen=True)
class ConsumerSettings:
    group: str
    client_id: str = "cronwire-executor"
    poll_ms: int = 50
    session_timeout_ms: int = 10_000
    heartbeat_interval_ms: int = 1_000
    max_poll_interval_ms: int = 300_000

    @property
    def commit_bound_seconds(self) -> float:
        """A commit looks for a coordinator for as long as it takes, and with the broker
        gone that is for ever (seen on a restarted Apache Kafka)."""
        return self.session_timeout_ms / 1000 + 5.0

    def consumer(self, link: KafkaLink) -> AIOKafkaConsumer:
        return AIOKafkaConsumer(
            bootstrap_servers=link.bootstrap, group_id=self.group,
            client_id=self.client_id, enable_auto_commit=False,
            auto_offset_reset="earliest",
            session_timeout_ms=self.session_timeout_ms,
            heartbeat_interval_ms=self.heartbeat_interval_ms,
            max_poll_interval_ms=self.max_poll_interval_ms,
            # A fetch that waits for more bytes than one key costs a round trip of up to
            # this long after every resume; keys are tiny and wanted at once.
            fetch_max_wait_ms=50,
            request_timeout_ms=max(link.request_timeout_ms, self.session_timeout_ms + 1000),
        )

    async def fetch(self, consumer: AIOKafkaConsumer, limit: int) -> dict[TopicPartition, Any]:
        """``getmany``, bounded: a consumer stopped under it (the broker was lost) can
        leave the call waiting for ever, which would keep the task from its successor."""
        fetch = asyncio.ensure_future(consumer.getmany(timeout_ms=self.poll_ms, max_records=limit))
        bound = (self.poll_ms + self.session_timeout_ms) / 1000 + 5.0  # a rebalance blocks it
        done, _ = await asyncio.wait({fetch}, timeout=bound)
        if not done:
            fetch.cancel()
            raise TimeoutError("getmany did not return")
        batches: dict[TopicPartition, Any] = fetch.result()
        _refresh_stale_metadata(consumer)
        return batches


def _refresh_stale_metadata(consumer: AIOKafkaConsumer) -> None:
    """Refresh the metadata while it keeps the consumer from records, once a second.

    Two cases, both found by tests/chaos/test_kafka_cluster_faults.py, where aiokafka
    (0.14) waits for the metadata to age out (5 minutes by default) and the sweeper
    claims every run meanwhile:

    - An assigned partition stays without a position. aiokafka asks its offset (after a
      seek, or with no committed offset) of the leader in its cached metadata and, on
      NotLeaderForPartition, asks the same broker again every ``retry_backoff_ms``
      without a refresh — its fetch path does refresh; Java's consumer had this bug
      (KAFKA-9535). Seen after a thawed broker came back as a follower.
    - A subscribed topic has no partitions in the metadata. A replica creates the topic
      and subscribes at once; the broker that answers may not know the topic yet, and
      the group leader then assigns nothing to anyone, and keeps doing so at each
      rebalance with the same metadata. A refresh that names the topic makes it rejoin.

    Refreshing only then (not every few seconds for every consumer through
    ``metadata_max_age_ms``, which left sockets unclosed after a broker restart) costs
    nothing while the cluster is well. aiokafka has no public way to ask; if its
    internals change, this does nothing, and tests/integration/
    test_kafka_consumer_leader_move.py and test_kafka_consumer_late_topic.py fail."""
    if not (_awaits_position(consumer) or _lacks_a_topic(consumer)):
        _stuck_since.pop(consumer, None)
        return
    now = time.monotonic()
    since = _stuck_since.setdefault(consumer, now)
    if now - since >= STUCK_RESET_SECONDS:
        consumer._client.force_metadata_update()
        _stuck_since[consumer] = now


def _awaits_position(consumer: AIOKafkaConsumer) -> bool:
    try:
        assignment = consumer._subscription.subscription.assignment
        return any(assignment.state_value(tp).awaiting_reset for tp in assignment.tps)
    except AttributeError:  # no assignment yet (or aiokafka's internals moved)
        return False


def _lacks_a_topic(consumer: AIOKafkaConsumer) -> bool:
    try:
        cluster = consumer._client.cluster
        return any(not cluster.partitions_for_topic(topic) for topic in consumer.subscription())
    except AttributeError:  # aiokafka's internals moved
        return False
