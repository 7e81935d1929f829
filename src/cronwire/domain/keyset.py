"""Keyset pages and their opaque cursors: base64url of the last row's sort key.

A run page is ordered by (scheduled_for DESC, id DESC), so its cursor is that pair; the
next page asks for rows strictly below it. Rows inserted or updated while a client pages
cannot shift the boundary (unlike OFFSET), so nothing that existed when paging started is
skipped or repeated. A schedule page is ordered by id. The version prefix lets the format
change without misreading old cursors.
"""

from __future__ import annotations

import base64
import binascii
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Generic, TypeVar

from cronwire.domain.errors import RuleViolation
from cronwire.domain.model import epoch_micros

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MAX_CURSOR_CHARS = 200
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Page(Generic[T]):
    """One keyset page; ``more`` says whether another page follows."""

    items: Sequence[T]
    more: bool


def page_of(found: Sequence[T], limit: int) -> Page[T]:
    """The stores are asked for ``limit + 1`` rows: the extra one only says "more"."""
    return Page(found[:limit], len(found) > limit)


@dataclass(frozen=True, slots=True)
class HistoryPosition:
    """Where one run stands in history order (newest scheduled_for first, then id): what
    a run cursor encodes. Not kafka mode's run key (ports.RunKey), which names a row."""

    scheduled_for: datetime
    id: uuid.UUID


def _encode(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode("ascii")).decode("ascii").rstrip("=")


def _decode(cursor: str, kind: str) -> list[str]:
    bad = RuleViolation("cursor", "is not a cursor this API returned")
    if len(cursor) > MAX_CURSOR_CHARS:
        raise bad
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode("ascii")
    except (binascii.Error, ValueError):
        raise bad from None
    parts = text.split(":")
    if parts[0] != kind:
        raise bad
    return parts[1:]


def encode_run_cursor(key: HistoryPosition) -> str:
    return _encode(f"r1:{epoch_micros(key.scheduled_for)}:{key.id.hex}")


def decode_run_cursor(cursor: str) -> HistoryPosition:
    """The key a run cursor encodes; RuleViolation("cursor", ...) if it is not one."""
    try:
        micros, hex_id = _decode(cursor, "r1")
        return HistoryPosition(_EPOCH + timedelta(microseconds=int(micros)), uuid.UUID(hex=hex_id))
    except (ValueError, OverflowError):
        raise RuleViolation("cursor", "is not a cursor this API returned") from None


def encode_id_cursor(last_id: uuid.UUID) -> str:
    return _encode(f"s1:{last_id.hex}")


def decode_id_cursor(cursor: str) -> uuid.UUID:
    try:
        (hex_id,) = _decode(cursor, "s1")
        return uuid.UUID(hex=hex_id)
    except ValueError:
        raise RuleViolation("cursor", "is not a cursor this API returned") from None
