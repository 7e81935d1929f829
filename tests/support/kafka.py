"""Kafka mode in-process on the real broker: link, consumer, publisher, relay, hybrid source.

Every use gets its own topic and consumer group, so tests sharing the session broker
never see each other's keys. Consumer-group timing is short (tansu's rebalance waits
about session_timeout / 2).
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass

import asyncpg
from aiokafka import AIOKafkaProducer

from cronwire.adapters.clock import SystemClock
from cronwire.adapters.kafka.hints import KafkaRunHints
from cronwire.adapters.kafka.link import KafkaLink
from cronwire.adapters.kafka.publisher import KafkaRunPublisher
from cronwire.adapters.postgres.claim_source import PostgresClaimSource
from cronwire.adapters.postgres.keyed_claims import PostgresKeyedClaims
from cronwire.adapters.postgres.outbox_store import PostgresOutboxStore
from cronwire.domain.model import ClaimBatch, ClaimedRun
from cronwire.harness.seeding import SeededSchedule, seed_schedule, seed_tenant
from cronwire.service.executor.hybrid_claims import HybridClaimSource
from cronwire.service.outbox_relay import OutboxRelay
from tests.support.secrets import secret_box

FAST_GROUP = {"session_timeout_ms": 2000, "heartbeat_interval_ms": 300}
UNREACHABLE_URL = "http://127.0.0.1:9/hook"  # runs these tests never deliver


async def new_schedule(pool: asyncpg.Pool) -> SeededSchedule:
    """A schedule of a fresh tenant (so its keys land on a partition of their own choosing)."""
    async with pool.acquire() as conn:
        return await seed_schedule(conn, await seed_tenant(conn), UNREACHABLE_URL)


@dataclass
class KafkaMode:
    link: KafkaLink
    hints: KafkaRunHints
    publisher: KafkaRunPublisher
    relay: OutboxRelay
    source: HybridClaimSource

    async def settle(self, within: float = 30.0) -> int:
        """Publish every due run and wait until the consumer received all keys published
        so far; returns how many keys were published by this call."""
        before = self.relay.published
        while True:
            marked = self.relay.published
            await self.relay.step()
            if self.relay.published == marked:
                break
        try:
            async with asyncio.timeout(within):
                while self.hints.delivered < self.relay.published:  # noqa: ASYNC110 - a counter
                    await asyncio.sleep(0.02)
        except TimeoutError:
            raise TimeoutError(f"the consumer received {self.hints.delivered} of "
                               f"{self.relay.published} published keys within {within}s") from None
        return self.relay.published - before

    async def claim_keys(self, count: int, within: float = 30.0) -> ClaimBatch:
        """Claim until ``count`` runs are leased, as one batch with the sources summed.
        One claim usually takes them all; under a loaded suite a rebalance (or a link probe
        that timed out) can drop the received keys before the claim, and the consumer reads
        them again from the committed offset, so the claim is repeated until they are back."""
        runs: list[ClaimedRun] = []
        sources: Counter[str] = Counter()
        async with asyncio.timeout(within):
            while len(runs) < count:
                batch = await self.source.claim("a", count - len(runs), 30)
                runs.extend(batch.runs)
                sources.update({label: n for label, n in batch.sources if n})
                if len(runs) < count:
                    await self.hints.wait(0.2)
        return ClaimBatch(tuple(runs), sources=tuple(sorted(sources.items())))


@contextlib.asynccontextmanager
async def kafka_mode(
    pool: asyncpg.Pool,
    bootstrap: str,
    *,
    grace_seconds: float = 5.0,
    sweep_seconds: float = 1.0,
    buffer_limit: int = 500,
    partitions: int = 3,
    probe_seconds: float = 0.5,
    topic: str | None = None,
) -> AsyncIterator[KafkaMode]:
    topic = topic or f"runs-{uuid.uuid4().hex[:10]}"
    link = KafkaLink(bootstrap, topic, partitions, probe_seconds=probe_seconds,
                     request_timeout_ms=3000)
    await link.start()
    hints = KafkaRunHints(link, f"group-{topic}", buffer_limit=buffer_limit, **FAST_GROUP)
    await hints.start()
    publisher = KafkaRunPublisher(link)
    relay = OutboxRelay(PostgresOutboxStore(pool), publisher, poll_seconds=0.05)
    source = HybridClaimSource(
        hints, PostgresKeyedClaims(pool, secret_box(pool)), PostgresClaimSource(pool, secret_box(pool)), SystemClock(),
        grace_seconds=grace_seconds, sweep_seconds=sweep_seconds,
    )
    try:
        yield KafkaMode(link, hints, publisher, relay, source)
    finally:
        await hints.close()
        await publisher.close()
        await link.close()


async def produce_one(bootstrap: str, topic: str, value: bytes = b"run-key") -> None:
    """One record to partition 0 of ``topic``, acknowledged by every in-sync replica."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
    await producer.start()
    try:
        await producer.send_and_wait(topic, value, partition=0)
    finally:
        await producer.stop()
