"""The consumer's keys between the broker and the claim: buffered per partition, taken
round-robin across partitions, and settled (their offsets made committable) only once the
claim that took them has committed. No I/O: the consumer task fills it, the claim empties
it, and neither waits on the other."""

from __future__ import annotations

from collections import deque
from collections.abc import Collection, Iterable

from aiokafka import TopicPartition

from cronwire.ports import RunKey

# (offset, key), or (offset, None) for an unreadable message: its offset is still settled
# with the keys taken around it, so poison is committed and never read again.
Entry = tuple[int, RunKey | None]


class KeyBuffer:
    def __init__(self, limit: int) -> None:
        self.limit = max(1, limit)  # entries per partition before it is paused
        self._queues: dict[TopicPartition, deque[Entry]] = {}
        self._taken: dict[TopicPartition, int] = {}  # highest offset taken, not yet settled
        self._settled: dict[TopicPartition, int] = {}  # next offsets to commit
        # Keys still in the broker beyond what was fetched (high watermark - next offset),
        # from the latest fetch of each partition.
        self._behind: dict[TopicPartition, int] = {}

    def __bool__(self) -> bool:
        return bool(self._queues)

    @property
    def buffered(self) -> int:
        return sum(len(queue) for queue in self._queues.values())

    @property
    def backlogged(self) -> bool:
        """At least a buffer's worth of a partition's keys waits in the broker behind what
        was fetched: its keys come faster than this replica claims them, and whatever is
        behind them in the partition waits. Whether the buffer is full at this moment does
        not matter (a claim by key makes room for a moment in every batch). A buffer full
        of keys that are all here (the keys republished after a broker restart) is not a
        backlog: they are worked through in a few claims. What is behind a paused
        partition comes from ``note_end``, as no fetch brings its high watermark."""
        return any(behind >= self.limit for behind in self._behind.values())

    def full_partitions(self) -> list[TopicPartition]:
        return [tp for tp, queue in self._queues.items() if len(queue) >= self.limit]

    def note_end(self, tp: TopicPartition, end_offset: int) -> None:
        """The partition's end offset, asked while it is paused: no fetch brings its high
        watermark then, and the keys published meanwhile are exactly what ``backlogged``
        must see."""
        queue = self._queues.get(tp)
        if queue:
            self._behind[tp] = max(0, end_offset - (queue[-1][0] + 1))

    def full(self, tp: TopicPartition) -> bool:
        return len(self._queues.get(tp, ())) >= self.limit

    def add(self, tp: TopicPartition, entries: Iterable[Entry], behind: int | None) -> None:
        if behind is not None:
            self._behind[tp] = max(0, behind)
        self._queues.setdefault(tp, deque()).extend(entries)

    def take(self, limit: int) -> list[RunKey]:
        """Up to ``limit`` entries' keys, one partition at a time in turn (oldest first
        within each partition, so the offsets taken from a partition stay contiguous)."""
        keys: list[RunKey] = []
        taken = 0
        while taken < limit and self._queues:
            for tp in list(self._queues):
                queue = self._queues[tp]
                if not queue:  # never expected (entries are queued only when read)
                    del self._queues[tp]
                    continue
                offset, key = queue.popleft()
                taken += 1
                self._taken[tp] = max(offset, self._taken.get(tp, -1))
                if key is not None:
                    keys.append(key)
                if not queue:
                    del self._queues[tp]
                if taken >= limit:
                    break
        return keys

    def settle_taken(self) -> None:
        """The claim that took the keys committed: their offsets may be committed."""
        for tp, offset in self._taken.items():
            self._settled[tp] = max(offset + 1, self._settled.get(tp, 0))
        self._taken.clear()

    def pop_settled(self, assigned: Collection[TopicPartition]) -> dict[TopicPartition, int]:
        """The offsets to commit for partitions still assigned; the rest are forgotten
        (their new owner re-reads those keys, and the claim finds their runs taken)."""
        offsets = {tp: offset for tp, offset in self._settled.items() if tp in assigned}
        self._settled.clear()
        return offsets

    def has_settled(self) -> bool:
        return bool(self._settled)

    def drop_unsettled(self) -> None:
        """Forget the buffered and taken entries (a rewind re-reads them from the broker)."""
        self._taken.clear()
        self._queues.clear()
        self._behind.clear()

    def drop(self, partitions: Iterable[TopicPartition]) -> None:
        for tp in partitions:
            self._queues.pop(tp, None)
            self._taken.pop(tp, None)
            self._settled.pop(tp, None)
            self._behind.pop(tp, None)

    def clear(self) -> None:
        self.drop_unsettled()
        self._settled.clear()
