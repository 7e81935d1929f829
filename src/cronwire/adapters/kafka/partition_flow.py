"""The consumer's flow over its partitions: a partition whose key buffer is full is paused
and resumed once it has room, and what waits in the broker behind a paused partition is
asked of the broker, since no fetch brings its high watermark while it is paused."""

from __future__ import annotations

import asyncio
import logging

from aiokafka import AIOKafkaConsumer

from cronwire.adapters.kafka.calls import KAFKA_FAILURES
from cronwire.adapters.kafka.key_buffer import KeyBuffer

log = logging.getLogger(__name__)

# How often a paused partition's end offset is asked (one ListOffsets request): what is
# behind a full buffer grows while nothing is fetched from it.
BEHIND_ASK_SECONDS = 0.5


class PartitionFlow:
    def __init__(self, keys: KeyBuffer) -> None:
        self._keys = keys
        self._asked_at: float | None = None  # the loop's clock

    def pace(self, consumer: AIOKafkaConsumer) -> None:
        """Pause each partition whose buffer is full, resume it when it has room; the
        consumer keeps polling either way (heartbeats and max_poll_interval_ms)."""
        assigned = consumer.assignment()
        if not assigned:
            return
        full = {tp for tp in assigned if self._keys.full(tp)}
        if full:
            consumer.pause(*full)
        room = [tp for tp in consumer.paused() if tp not in full]
        if room:
            consumer.resume(*room)

    async def ask_behind(self, consumer: AIOKafkaConsumer) -> None:
        """Keep ``KeyBuffer.backlogged`` true to what waits behind full, paused buffers.
        Without it a partition paused before its burst was published looked caught up, and
        the outbox went on publishing the whole burst into it (ADR 0063). At most every
        ``BEHIND_ASK_SECONDS``; best effort: a failed ask keeps the last figure."""
        full = self._keys.full_partitions()
        now = asyncio.get_running_loop().time()
        if not full or (self._asked_at is not None
                        and now - self._asked_at < BEHIND_ASK_SECONDS):
            return
        self._asked_at = now
        try:
            async with asyncio.timeout(BEHIND_ASK_SECONDS * 4):
                ends = await consumer.end_offsets(full)
        except KAFKA_FAILURES as exc:
            log.debug("kafka end offsets not known: %s: %s", type(exc).__name__, exc)
            return
        for tp, end in ends.items():
            self._keys.note_end(tp, end)
