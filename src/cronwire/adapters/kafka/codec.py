"""A run key on the wire: 25 bytes, never the run's payload (Postgres holds that).

``version (1 byte) | run id (16 bytes) | scheduled_for (int64 µs since the epoch, UTC)``.
The message key is the tenant id, so one tenant's keys share a partition.
"""

from __future__ import annotations

import struct
from datetime import UTC, datetime, timedelta
from uuid import UUID

from cronwire.domain.model import epoch_micros
from cronwire.ports import RunKey

_VERSION = 1
_FORMAT = struct.Struct(">B16sq")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def encode_key(run_id: UUID, scheduled_for: datetime) -> bytes:
    return _FORMAT.pack(_VERSION, run_id.bytes, epoch_micros(scheduled_for))


def decode_key(value: bytes | None) -> RunKey | None:
    """The key, or None for a message this version cannot read (it is skipped)."""
    if value is None or len(value) != _FORMAT.size:
        return None
    version, raw_id, micros = _FORMAT.unpack(value)
    if version != _VERSION:
        return None
    return UUID(bytes=raw_id), _EPOCH + timedelta(microseconds=micros)


MALFORMED, UNKNOWN_VERSION, OUT_OF_RANGE = "malformed", "unknown_version", "out_of_range"


def read_run_key(value: bytes | None) -> RunKey | str:
    """The run key a message carries, or why it cannot be read (MALFORMED,
    UNKNOWN_VERSION, OUT_OF_RANGE). Total: anyone who can write to the topic can write
    any bytes, so this never raises, whatever they are (ADR 0027)."""
    if value is None or len(value) != _FORMAT.size:
        return MALFORMED
    if value[0] != _VERSION:
        return UNKNOWN_VERSION
    try:
        key = decode_key(bytes(value))
    except (OverflowError, ValueError):  # a time no datetime can hold
        return OUT_OF_RANGE
    return key if key is not None else MALFORMED
