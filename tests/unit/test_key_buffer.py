"""KeyBuffer: when a replica's keys count as backlogged (ADR 0025, ADR 0063).

The outbox relay and the hybrid claim source both read ``backlogged``: while it holds, the
relay publishes only each tenant's small share of fresh runs and the claim source takes
runs fairly as well as by key. It must say what waits in the broker, not only what is
in the buffer."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from aiokafka import TopicPartition

from cronwire.adapters.kafka.key_buffer import KeyBuffer

TP = TopicPartition("runs", 0)
OTHER = TopicPartition("runs", 1)


def _entries(first: int, count: int) -> list[tuple[int, tuple[uuid.UUID, datetime]]]:
    at = datetime(2026, 12, 3, tzinfo=UTC)
    return [(offset, (uuid.uuid4(), at)) for offset in range(first, first + count)]


def test_a_full_buffer_with_nothing_behind_it_is_not_a_backlog() -> None:
    # Keys republished after a broker restart: all here, worked through in a few claims.
    keys = KeyBuffer(limit=50)
    keys.add(TP, _entries(0, 50), behind=0)
    assert keys.full(TP) and not keys.backlogged


def test_a_buffers_worth_of_keys_waiting_in_the_broker_is_a_backlog() -> None:
    keys = KeyBuffer(limit=50)
    keys.add(TP, _entries(0, 50), behind=50)
    assert keys.backlogged


def test_the_backlog_holds_while_a_claim_has_just_made_room_in_the_buffer() -> None:
    # The burst's 100k: each claim by key takes a batch, the buffer is below full for a
    # moment, and a relay reading "not backlogged" published 2,000 keys more each time.
    keys = KeyBuffer(limit=50)
    keys.add(TP, _entries(0, 50), behind=400)
    keys.take(30)
    assert not keys.full(TP)
    assert keys.backlogged


def test_a_paused_partitions_end_offset_updates_what_waits_behind_it() -> None:
    keys = KeyBuffer(limit=50)
    keys.add(TP, _entries(0, 50), behind=0)  # paused here: no fetch brings a watermark
    keys.add(OTHER, _entries(0, 3), behind=0)
    assert keys.full_partitions() == [TP]
    keys.note_end(TP, 50 + 120)  # the outbox went on publishing into the partition
    assert keys.backlogged
    keys.note_end(TP, 50)  # or not: nothing behind the buffer
    assert not keys.backlogged


def test_the_backlog_ends_once_the_broker_has_handed_over_what_it_held() -> None:
    keys = KeyBuffer(limit=50)
    keys.add(TP, _entries(0, 50), behind=200)
    assert keys.backlogged
    keys.take(50)
    keys.add(TP, _entries(50, 50), behind=10)  # the fetch that caught up
    assert not keys.backlogged


def test_an_end_offset_for_a_drained_partition_changes_nothing() -> None:
    keys = KeyBuffer(limit=50)
    keys.add(TP, _entries(0, 5), behind=0)
    keys.take(5)
    keys.note_end(TP, 5000)  # nothing buffered: the next fetch says what is behind
    assert not keys.backlogged
