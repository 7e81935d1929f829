"""KafkaRunHints: the executors' consumer group, as a buffer of run keys for the claim.

One background task owns the aiokafka consumer (getmany, commit, seek, pause/resume all
happen there); the executor's claim only takes keys from the buffer and reports back:

* ``enable_auto_commit=False``; offsets ``{tp: offset + 1}`` of taken keys are committed
  only after ``acknowledge()`` — that is, after the claim transaction committed;
* the task keeps calling ``getmany`` even when a partition's buffer is full (it is
  paused), or the consumer would leave the group after ``max_poll_interval_ms``;
* keys are buffered per partition and taken round-robin across partitions, and only a
  partition whose own buffer is full is paused: topics are keyed by tenant, so one
  tenant's burst fills one partition's buffer and cannot hold back the keys of tenants
  on the others (fairness between tenants of one partition is the claim SQL's);
* ``rewind()`` (a failed claim) drops the buffer and seeks to the committed offsets;
* on a rebalance, keys of revoked partitions are dropped: the lease, not the offset, owns
  a run, so a key delivered twice is only a claim that finds nothing;
* a message is anyone's input: :func:`read_run_key` never raises, and a message it cannot
  read (malformed, an unknown version, a time out of range) is counted, skipped and its
  offset committed with the keys around it, so no message can stop a replica (ADR 0027);
* the consumer task is supervised: a failure it did not expect is logged, the consumer is
  rebuilt after a pause, and ``consuming`` is False (``/readyz`` names it) meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition

from cronwire.adapters.kafka.codec import read_run_key
from cronwire.adapters.kafka.consumer import ConsumerSettings
from cronwire.adapters.kafka.key_buffer import KeyBuffer
from cronwire.adapters.kafka.link import KAFKA_FAILURES, KafkaLink, bounded
from cronwire.adapters.kafka.partition_flow import PartitionFlow
from cronwire.ports import RunKey

log = logging.getLogger(__name__)

RESTART_SECONDS = 1.0  # pause before a consumer task that failed is started again


class _Rebalance(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(self, hints: KafkaRunHints) -> None:
        self._hints = hints

    async def on_partitions_revoked(self, revoked: Any) -> None:
        await self._hints._revoked(set(revoked))

    async def on_partitions_assigned(self, assigned: Any) -> None:
        log.info("kafka partitions assigned: %s",
                 ",".join(str(tp.partition) for tp in sorted(assigned)) or "none")


class KafkaRunHints:
    def __init__(
        self,
        link: KafkaLink,
        group: str,
        *,
        buffer_limit: int = 500,
        poll_ms: int = 50,
        session_timeout_ms: int = 10_000,
        heartbeat_interval_ms: int = 1_000,
        max_poll_interval_ms: int = 300_000,
        client_id: str = "cronwire-executor",
        on_skipped: Callable[[str], None] | None = None,
    ) -> None:
        self._link = link
        self._settings = ConsumerSettings(group, client_id, poll_ms, session_timeout_ms,
                                          heartbeat_interval_ms, max_poll_interval_ms)
        self._keys = KeyBuffer(buffer_limit)
        self._rewind = False
        self._arrived = asyncio.Event()
        self._flow = PartitionFlow(self._keys)
        self._consumer: AIOKafkaConsumer | None = None
        self._generation = 0
        self._task: asyncio.Task[None] | None = None
        self.delivered = 0  # keys received, for tests and logs
        self.skipped = 0  # messages that could not be read
        self.restarts = 0  # consumer task failures survived
        self._on_skipped = on_skipped
        self._consuming = False
        link.on_down(self._stop_consumer)

    @property
    def healthy(self) -> bool:
        """The broker is reachable and the consumer task is running: otherwise the hybrid
        claim source falls back to its sweeper."""
        return self._link.healthy and self._consuming

    @property
    def consuming(self) -> bool:
        """The consumer task is running (False between a failure and its restart)."""
        return self._consuming

    async def start(self) -> None:
        self._consuming = True  # from now on, until the task fails
        self._task = asyncio.create_task(self._supervised(), name="kafka-hints")

    async def _supervised(self) -> None:
        while True:
            try:
                await self._run()
            except asyncio.CancelledError:
                self._consuming = False
                raise
            except Exception:
                self._consuming = False
                self.restarts += 1
                log.exception("kafka consumer task failed; restarting in %gs", RESTART_SECONDS)
                with contextlib.suppress(Exception):
                    await self._stop_consumer()
                await asyncio.sleep(RESTART_SECONDS)
                self._consuming = True

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        await self._commit()
        await self._stop_consumer()

    # -- the claim's side (never blocks, never touches the consumer) --------------------

    @property
    def buffered(self) -> int:
        return self._keys.buffered

    @property
    def backlogged(self) -> bool:
        """See :attr:`KeyBuffer.backlogged`: this replica's keys come faster than it claims."""
        return self._keys.backlogged

    def take(self, limit: int) -> list[RunKey]:
        """Up to ``limit`` keys, one partition at a time in turn."""
        keys = self._keys.take(limit)
        if not self._keys:
            self._arrived.clear()
        return keys

    async def wait(self, seconds: float) -> None:
        if self._keys:
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._arrived.wait(), seconds)

    def acknowledge(self) -> None:
        self._keys.settle_taken()

    def rewind(self) -> None:
        self._keys.drop_unsettled()
        self._arrived.clear()
        self._rewind = True

    # -- the consumer task -------------------------------------------------------------

    async def _run(self) -> None:
        while True:
            if not self._link.healthy:
                await self._stop_consumer()
                await self._link.wait_up(1.0)
                continue
            try:
                consumer = await self._current()
                await self._commit()
                if self._rewind:
                    self._rewind = False
                    if consumer.assignment():
                        await consumer.seek_to_committed()
                self._flow.pace(consumer)
                await self._flow.ask_behind(consumer)
                batches = await self._fetch(consumer, self._keys.limit)
            except KAFKA_FAILURES as exc:
                log.warning("kafka consumer: %s: %s", type(exc).__name__, exc)
                self._link.suspect()
                await asyncio.sleep(0.5)
                continue
            for tp, messages in batches.items():
                if not messages:
                    continue
                highwater = consumer.highwater(tp)
                behind = None if highwater is None else highwater - (messages[-1].offset + 1)
                entries = [(message.offset, self._read(message.value)) for message in messages]
                self._keys.add(tp, entries, behind)
                self.delivered += len(messages)
            if self._keys:
                self._arrived.set()

    def _read(self, value: bytes | None) -> RunKey | None:
        """The key, or None for a message that is skipped (its entry still carries its
        offset, so it is committed with the keys taken around it)."""
        key = read_run_key(value)
        if isinstance(key, tuple):
            return key
        self.skipped += 1
        log.warning("kafka: skipped an unreadable run-key message (%s)", key)
        if self._on_skipped is not None:
            self._on_skipped(key)
        return None

    async def _fetch(self, consumer: AIOKafkaConsumer, limit: int) -> dict[TopicPartition, Any]:
        return await self._settings.fetch(consumer, limit)

    async def _current(self) -> AIOKafkaConsumer:
        if self._consumer is not None and self._generation == self._link.generation:
            return self._consumer
        await self._stop_consumer()
        consumer = self._settings.consumer(self._link)
        self._generation = self._link.generation
        try:
            await consumer.start()
            consumer.subscribe([self._link.topic], listener=_Rebalance(self))
        except BaseException:
            await bounded(consumer.stop(), 5.0)
            raise
        self._consumer = consumer
        return consumer

    async def _commit(self) -> None:
        consumer = self._consumer
        if consumer is None or not self._keys.has_settled():
            return
        offsets = self._keys.pop_settled(consumer.assignment())
        if not offsets:
            return
        try:
            # Bounded, or this task would never reach its next consumer when the broker
            # returns.
            async with asyncio.timeout(self._settings.commit_bound_seconds):
                await consumer.commit(offsets)
        except KAFKA_FAILURES as exc:
            # A rebalance moved the partition on: its new owner re-reads those keys, and
            # the claim finds their runs leased or finished. Nothing is lost.
            log.info("kafka commit skipped: %s: %s", type(exc).__name__, exc)

    async def _revoked(self, revoked: set[TopicPartition]) -> None:
        await self._commit()
        self._keys.drop(revoked)
        if not self._keys:
            self._arrived.clear()

    async def _stop_consumer(self) -> None:
        consumer, self._consumer = self._consumer, None
        self._keys.clear()
        self._arrived.clear()
        if consumer is not None:
            await bounded(consumer.stop(), 5.0)
