"""The executors' consumer: how it is configured, and how long its calls may take.

aiokafka's fetch and commit can wait for ever when the broker goes away under them (a
fetch during a rebalance, a commit looking for its coordinator), so both are bounded by
the session timing the consumer was configured with.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition

from cronwire.adapters.kafka.link import KafkaLink

# How stale the consumer's idea of each partition's leader may get (see ``consumer``).
METADATA_MAX_AGE_MS = 3_000


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
            # aiokafka (0.14) asks a partition's offsets of the leader in its cached
            # metadata and, on NotLeaderForPartition, asks the same broker again every
            # retry_backoff without refreshing the metadata (its fetch path does refresh;
            # Java's consumer had this bug: KAFKA-9535). A partition whose position had to
            # be reset after its leader moved (a thawed or restarted broker, a preferred-
            # leader election) then delivered nothing until the metadata aged out: 5
            # minutes by default, all that time claimed by the sweeper. Refreshed every
            # few seconds, the partition is read again within about that, under the
            # default sweep grace (5 s); one metadata request for one topic that often is
            # nothing beside the link's own probe every second.
            metadata_max_age_ms=METADATA_MAX_AGE_MS,
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
        return batches
