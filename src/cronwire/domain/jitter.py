"""Jitter: each occurrence's delivery offset, the same on every replica.

A schedule with ``jitter_seconds = J`` delivers its occurrence at ``scheduled_for + offset``
with the offset in ``[0, J)`` (whole milliseconds), taken from a hash of the schedule id
and the occurrence. Nothing random and nothing stored decides it: a replica that plans the
occurrence again (a replan, a crash before commit) computes the same ``fire_after``, and a
test can compute it too. A uniform hash spreads one instant's occurrences evenly over the
window (100,000 schedules on ``0 * * * *`` with J = 60 deliver about 1,667 per second).
"""

from __future__ import annotations

import hashlib
import uuid
from datetime import datetime, timedelta

from cronwire.domain.model import epoch_micros

MAX_JITTER_SECONDS = 3600


def jitter_ms(schedule_id: uuid.UUID, scheduled_for: datetime, jitter_seconds: int) -> int:
    """The offset of one occurrence in whole milliseconds, in ``[0, jitter_seconds * 1000)``."""
    if jitter_seconds <= 0:
        return 0
    name = f"{schedule_id}/{epoch_micros(scheduled_for)}".encode()
    digest = hashlib.blake2b(name, digest_size=8, person=b"cronwire-jitter").digest()
    return int.from_bytes(digest) % (jitter_seconds * 1000)


def jittered(schedule_id: uuid.UUID, scheduled_for: datetime, jitter_seconds: int) -> datetime:
    """``fire_after`` of one occurrence: ``scheduled_for`` plus its offset."""
    offset = jitter_ms(schedule_id, scheduled_for, jitter_seconds)
    return scheduled_for + timedelta(milliseconds=offset)
