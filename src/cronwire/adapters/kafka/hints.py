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
  offset committed with the keys around it, so no message can stop a replica (issue 22);
* the consumer task is supervised: a failure it did not expect is logged, the consumer is
  rebuilt after a pause, and ``consuming`` is False (``/readyz`` names it) meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition

from cronwire.adapters.kafka.codec import decode_key, encode_key
from cronwire.adapters.kafka.link import KAFKA_FAILURES, KafkaLink, bounded
from cronwire.ports import RunKey

log = logging.getLogger(__name__)

MALFORMED, UNKNOWN_VERSION, OUT_OF_RANGE = "malformed", "unknown_version", "out_of_range"
# The wire format's size and version byte, as the codec writes them.
_SAMPLE_KEY = encode_key(UUID(int=0), datetime(1970, 1, 1, tzinfo=UTC))
_KEY_BYTES, _KEY_VERSION = len(_SAMPLE_KEY), _SAMPLE_KEY[0]
RESTART_SECONDS = 1.0  # pause before a consumer task that failed is started again


def read_run_key(value: bytes | None) -> RunKey | str:
    """The run key a message carries, or why it cannot be read (MALFORMED,
    UNKNOWN_VERSION, OUT_OF_RANGE). Total: never raises, whatever the bytes."""
    if value is None or len(value) != _KEY_BYTES:
        return MALFORMED
    if value[0] != _KEY_VERSION:
        return UNKNOWN_VERSION
    try:
        key = decode_key(bytes(value))
    except (OverflowError, ValueError):  # a time no datetime can hold
        return OUT_OF_RANGE
    return key if key is not None else MALFORMED


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
        self._group = group
        self._buffer_limit = max(1, buffer_limit)
        self._poll_ms = poll_ms
        self._session_timeout_ms = session_timeout_ms
        self._heartbeat_interval_ms = heartbeat_interval_ms
        self._max_poll_interval_ms = max_poll_interval_ms
        self._client_id = client_id
        # Per partition: (offset, key or None for an unreadable message), oldest first.
        self._buffers: dict[TopicPartition, deque[tuple[int, RunKey | None]]] = {}
        self._taken: dict[TopicPartition, int] = {}  # highest offset taken, not yet settled
        self._settled: dict[TopicPartition, int] = {}  # next offsets to commit
        # Keys still in the broker beyond what was fetched (high watermark - next offset),
        # from the latest fetch of each partition.
        self._behind: dict[TopicPartition, int] = {}
        self._rewind = False
        self._arrived = asyncio.Event()
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
        return sum(len(queue) for queue in self._buffers.values())

    @property
    def backlogged(self) -> bool:
        """A partition's buffer is full (so it is paused) and at least as many keys again
        wait in the broker behind it: its keys come faster than this replica claims them,
        and whatever is behind them in the partition waits. A buffer full of keys that
        are all here (the keys republished after a broker restart) is not a backlog: they
        are worked through in a few claims."""
        return any(len(queue) >= self._buffer_limit
                   and self._behind.get(tp, 0) >= self._buffer_limit
                   for tp, queue in self._buffers.items())

    def take(self, limit: int) -> list[RunKey]:
        """Up to ``limit`` keys, one partition at a time in turn (oldest first within each
        partition, so the offsets taken from a partition stay contiguous)."""
        keys: list[RunKey] = []
        taken = 0
        while taken < limit and self._buffers:
            for tp in list(self._buffers):
                queue = self._buffers[tp]
                if not queue:  # never expected (entries are queued only when read)
                    del self._buffers[tp]
                    continue
                offset, key = queue.popleft()
                taken += 1
                self._taken[tp] = max(offset, self._taken.get(tp, -1))
                if key is not None:
                    keys.append(key)
                if not queue:
                    del self._buffers[tp]
                if taken >= limit:
                    break
        if not self._buffers:
            self._arrived.clear()
        return keys

    async def wait(self, seconds: float) -> None:
        if self._buffers:
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._arrived.wait(), seconds)

    def acknowledge(self) -> None:
        for tp, offset in self._taken.items():
            self._settled[tp] = max(offset + 1, self._settled.get(tp, 0))
        self._taken.clear()

    def rewind(self) -> None:
        self._taken.clear()
        self._buffers.clear()
        self._behind.clear()
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
                self._flow(consumer)
                batches = await self._fetch(consumer, self._buffer_limit)
            except KAFKA_FAILURES as exc:
                log.warning("kafka consumer: %s: %s", type(exc).__name__, exc)
                self._link.suspect()
                await asyncio.sleep(0.5)
                continue
            for tp, messages in batches.items():
                if not messages:
                    continue
                highwater = consumer.highwater(tp)
                if highwater is not None:
                    self._behind[tp] = max(0, highwater - (messages[-1].offset + 1))
                entries = [(message.offset, self._read(message.value)) for message in messages]
                self._buffers.setdefault(tp, deque()).extend(entries)
                self.delivered += len(messages)
            if self._buffers:
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
        """``getmany``, bounded: a consumer stopped under it (the broker was lost) can
        leave the call waiting for ever, which would keep this task from its successor."""
        fetch = asyncio.ensure_future(consumer.getmany(timeout_ms=self._poll_ms, max_records=limit))
        bound = (self._poll_ms + self._session_timeout_ms) / 1000 + 5.0  # a rebalance blocks it
        done, _ = await asyncio.wait({fetch}, timeout=bound)
        if not done:
            fetch.cancel()
            raise TimeoutError("getmany did not return")
        batches: dict[TopicPartition, Any] = fetch.result()
        return batches

    def _flow(self, consumer: AIOKafkaConsumer) -> None:
        """Pause each partition whose buffer is full, resume it when it has room; the
        consumer keeps polling either way (heartbeats and max_poll_interval_ms)."""
        assigned = consumer.assignment()
        if not assigned:
            return
        full = {tp for tp in assigned
                if len(self._buffers.get(tp, ())) >= self._buffer_limit}
        if full:
            consumer.pause(*full)
        room = [tp for tp in consumer.paused() if tp not in full]
        if room:
            consumer.resume(*room)

    async def _current(self) -> AIOKafkaConsumer:
        if self._consumer is not None and self._generation == self._link.generation:
            return self._consumer
        await self._stop_consumer()
        consumer = AIOKafkaConsumer(
            bootstrap_servers=self._link.bootstrap, group_id=self._group,
            client_id=self._client_id, enable_auto_commit=False,
            auto_offset_reset="earliest",
            session_timeout_ms=self._session_timeout_ms,
            heartbeat_interval_ms=self._heartbeat_interval_ms,
            max_poll_interval_ms=self._max_poll_interval_ms,
            # A fetch that waits for more bytes than one key costs a round trip of up to
            # this long after every resume; keys are tiny and wanted at once.
            fetch_max_wait_ms=50,
            request_timeout_ms=max(self._link.request_timeout_ms, self._session_timeout_ms + 1000),
        )
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
        if consumer is None or not self._settled:
            return
        assigned = consumer.assignment()
        offsets = {tp: offset for tp, offset in self._settled.items() if tp in assigned}
        self._settled.clear()
        if not offsets:
            return
        try:
            await consumer.commit(offsets)
        except KAFKA_FAILURES as exc:
            # A rebalance moved the partition on: its new owner re-reads those keys, and
            # the claim finds their runs leased or finished. Nothing is lost.
            log.info("kafka commit skipped: %s: %s", type(exc).__name__, exc)

    async def _revoked(self, revoked: set[TopicPartition]) -> None:
        await self._commit()
        for tp in revoked:
            self._buffers.pop(tp, None)
            self._taken.pop(tp, None)
            self._settled.pop(tp, None)
            self._behind.pop(tp, None)
        if not self._buffers:
            self._arrived.clear()

    async def _stop_consumer(self) -> None:
        consumer, self._consumer = self._consumer, None
        self._buffers.clear()
        self._taken.clear()
        self._settled.clear()
        self._arrived.clear()
        if consumer is not None:
            await bounded(consumer.stop(), 5.0)
