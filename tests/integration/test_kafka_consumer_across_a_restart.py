"""The executors' consumer survives its broker going away while it fetches and commits.

Found on a restarted Apache Kafka (tests/chaos/test_kafka_processes.py): the consumer task
waited for ever in aiokafka's commit (it looks for a coordinator until it finds one), or
died of ``ConsumerStoppedError`` from a ``getmany`` whose consumer the link had stopped. It
then never consumed again, and every run came through the sweeper. Timing decides which
one; keys are produced and taken, and offsets committed, all the while."""

from __future__ import annotations

import asyncio
import contextlib
import uuid

from aiokafka import AIOKafkaProducer

from cronwire.adapters.embedded.kafka import EmbeddedBroker
from cronwire.adapters.kafka.hints import KafkaRunHints
from cronwire.adapters.kafka.link import KAFKA_FAILURES, KafkaLink
from tests.support.brokers import StandaloneKafka
from tests.support.polling import wait_until


async def _produce(bootstrap: str, topic: str, running: asyncio.Event) -> None:
    """Keys on every partition while ``running`` is set (a new producer after failures)."""
    while running.is_set():
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, request_timeout_ms=3000)
        try:
            await producer.start()
            while running.is_set():
                for key in range(12):
                    await producer.send(topic, b"k" * 25, key=str(key).encode())
                await asyncio.sleep(0.1)
        except KAFKA_FAILURES:
            await asyncio.sleep(0.5)
        finally:
            await producer.stop()


async def _take(hints: KafkaRunHints, running: asyncio.Event) -> None:
    """The claim's side: take and acknowledge, so offsets are committed all the time."""
    while running.is_set():
        hints.take(100)
        hints.acknowledge()
        await hints.wait(0.05)


async def test_the_consumer_resumes_after_its_broker_restarts_mid_commit(
    own_kafka: EmbeddedBroker | StandaloneKafka,
) -> None:
    broker = own_kafka
    await asyncio.to_thread(broker.start)
    topic = f"restart-{uuid.uuid4().hex[:8]}"
    link = KafkaLink(broker.bootstrap, topic, 6, probe_seconds=0.5)
    await link.start()
    hints = KafkaRunHints(link, f"group-{topic}")  # serve's session timings
    await hints.start()
    running = asyncio.Event()
    running.set()
    work = [asyncio.create_task(_produce(broker.bootstrap, topic, running)),
            asyncio.create_task(_take(hints, running))]
    try:
        await wait_until(lambda: hints.delivered >= 200, within=60)
        await asyncio.to_thread(broker.stop)
        await wait_until(lambda: not link.healthy, within=30)
        await asyncio.to_thread(broker.start)
        await wait_until(lambda: link.healthy, within=60)
        resumed_from = hints.delivered
        await wait_until(lambda: hints.delivered > resumed_from + 100, within=90)
    finally:
        running.clear()
        for task in work:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await hints.close()
        await link.close()
