"""KafkaRunPublisher: run keys to the topic, keyed by tenant_id, in record batches.

Settings for a real cluster (ADR 0031):

* ``acks=all``: a key counts as published once every in-sync replica has it (with the
  topic's ``min.insync.replicas``), so a leader that dies right after acknowledging
  does not take the key with it;
* idempotent where the broker grants producer ids (``KafkaLink.idempotent``, asked of
  the broker at each link generation): a retried batch is not written twice. tansu
  grants none, so there the producer is plain — a duplicated key is harmless anyway
  (the claim re-checks the run in Postgres);
* bounded: aiokafka retries a batch (``retry_backoff_ms`` apart, after a metadata
  refresh: a leader election) until its ``request_timeout_ms`` runs out, and the whole
  publish is bounded by ``send_timeout_seconds`` (the delivery timeout). Keys not
  acknowledged by then stay unpublished in the outbox and are sent again next round.

The producer is created per link generation and closed while the broker is down.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from datetime import datetime
from uuid import UUID

from aiokafka import AIOKafkaProducer
from aiokafka.partitioner import DefaultPartitioner

from cronwire.adapters.kafka.codec import encode_key
from cronwire.adapters.kafka.link import KAFKA_FAILURES, KafkaLink, bounded
from cronwire.domain.errors import BrokerError
from cronwire.ports import RunKey

log = logging.getLogger(__name__)
RETRY_BACKOFF_MS = 100  # between tries of a batch; a leader election takes longer


class KafkaRunPublisher:
    def __init__(
        self, link: KafkaLink, *, linger_ms: int = 5, send_timeout_seconds: float = 10.0,
        max_batch_bytes: int = 262_144,
    ) -> None:
        self._link = link
        self._linger_ms = linger_ms
        self._send_timeout = send_timeout_seconds
        self._max_batch_bytes = max_batch_bytes
        self._producer: AIOKafkaProducer | None = None
        self._generation = 0
        self._idempotent = False
        self._lock = asyncio.Lock()
        self._partitioner = DefaultPartitioner()
        link.on_down(self._drop_producer)

    @property
    def healthy(self) -> bool:
        return self._link.healthy

    @property
    def idempotent(self) -> bool:
        """The running producer is idempotent (False while none runs)."""
        return self._producer is not None and self._idempotent


    async def publish(self, runs: Sequence[tuple[UUID, datetime, UUID]]) -> list[RunKey]:
        """Send every run's key; the keys the broker acknowledged (in ``runs``' order)."""
        if not runs:
            return []
        if not self._link.healthy:
            raise BrokerError(f"kafka broker {self._link.bootstrap} is unreachable")
        try:
            async with asyncio.timeout(self._send_timeout):
                producer = await self._current()
                sends = await self._send_batches(producer, runs)
                results = await asyncio.gather(*(sent for sent, _ in sends),
                                               return_exceptions=True)
        except KAFKA_FAILURES as exc:
            self._link.suspect()
            await self._drop_producer()
            raise BrokerError(f"publishing {len(runs)} keys: {type(exc).__name__}: {exc}") from exc
        acked: set[int] = set()
        for (_, members), result in zip(sends, results, strict=True):
            if not isinstance(result, BaseException):
                acked.update(members)
        if len(acked) < len(runs):
            log.warning("the broker acknowledged %d of %d keys; the rest stay unpublished",
                        len(acked), len(runs))
            self._link.suspect()
        return [(runs[i][0], runs[i][1]) for i in sorted(acked)]

    async def _send_batches(
        self, producer: AIOKafkaProducer, runs: Sequence[tuple[UUID, datetime, UUID]]
    ) -> list[tuple[asyncio.Future[object], list[int]]]:
        """The keys as record batches, one partition each, on the partition the default
        partitioner picks for the tenant key (the one ``send`` would pick). One
        ``send(...)`` per key cost ~36 µs of Python each, about as much as writing the run:
        a batch's ``append`` is a few µs. Returns each batch's future and its runs' indexes."""
        topic = self._link.topic
        partitions = sorted(await producer.partitions_for(topic))
        keys = [tenant_id.bytes for _, _, tenant_id in runs]
        by_partition: dict[int, list[int]] = {}
        partition_of: dict[bytes, int] = {}  # murmur2 in Python: once per tenant, not per key
        for index, key in enumerate(keys):
            partition = partition_of.get(key)
            if partition is None:
                partition = partition_of[key] = self._partitioner(key, partitions, partitions)
            by_partition.setdefault(partition, []).append(index)
        sends: list[tuple[asyncio.Future[object], list[int]]] = []
        for partition, indexes in by_partition.items():
            batch = producer.create_batch()
            members: list[int] = []
            for index in indexes:
                run_id, at, _ = runs[index]
                value = encode_key(run_id, at)
                if batch.append(timestamp=None, key=keys[index], value=value) is None:  # full
                    sends.append((await producer.send_batch(batch, topic, partition=partition),
                                  members))
                    batch, members = producer.create_batch(), []
                    batch.append(timestamp=None, key=keys[index], value=value)
                members.append(index)
            if members:
                sends.append((await producer.send_batch(batch, topic, partition=partition),
                              members))
        return sends

    async def close(self) -> None:
        await self._drop_producer()

    async def _current(self) -> AIOKafkaProducer:
        async with self._lock:
            if self._producer is not None and self._generation == self._link.generation:
                return self._producer
            await self._stop(self._producer)
            producer = AIOKafkaProducer(
                bootstrap_servers=self._link.bootstrap, client_id="cronwire-publisher",
                acks="all", enable_idempotence=self._link.idempotent,
                linger_ms=self._linger_ms, max_batch_size=self._max_batch_bytes,
                request_timeout_ms=self._link.request_timeout_ms, retry_backoff_ms=RETRY_BACKOFF_MS,
            )
            self._producer, self._generation = None, self._link.generation
            self._idempotent = self._link.idempotent
            try:
                await producer.start()
            except BaseException:
                await self._stop(producer)
                raise
            self._producer = producer
            return producer

    async def _drop_producer(self) -> None:
        async with self._lock:
            producer, self._producer = self._producer, None
            await self._stop(producer)

    @staticmethod
    async def _stop(producer: AIOKafkaProducer | None) -> None:
        if producer is not None:
            await bounded(producer.stop(), 5.0)
