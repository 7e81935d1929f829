"""What a claimed run needs to leave, parsed and opened once per schedule version (ADR 0061:
the hot path does not pay for sealing per run).

A claim row carries the schedule's stored target, retry policy and sealed signing secrets.
Their text is the version: a PATCH re-seals the headers and a rotation seals a new secret
(fresh nonces, so new text), and the previous secret's expiry turns its column to NULL. So
a schedule's state is reused while those four texts are the ones it was opened from, and
opened again the moment any of them changes; nothing needs to invalidate it by hand.
"""

from __future__ import annotations

import functools
import json
import logging
import uuid
from collections.abc import Sequence

import asyncpg

from cronwire.adapters.postgres.sealed_fields import opened_secrets, opened_target
from cronwire.domain.documents import retry_from_document, target_from_document
from cronwire.domain.model import RetryPolicy, RunStatus, Target
from cronwire.domain.secrets import SecretError
from cronwire.ports.secrets import SecretBox

log = logging.getLogger(__name__)

# Schedules whose opened state is kept; beyond it the oldest is dropped (opened again if
# it comes back). 100,000 schedules' states are a few tens of MB.
CAPACITY = 131_072

DeliveryState = tuple[Target, RetryPolicy, tuple[str, ...]]
_Version = tuple[str, str, str | None, str | None]


@functools.lru_cache(maxsize=4096)
def _policies(text: str, retry_text: str) -> tuple[Target, RetryPolicy]:
    """Memoised on the documents' text: schedules sharing a target and policy are parsed
    once. Both results are treated as immutable by every caller."""
    try:
        target, retry = json.loads(text), json.loads(retry_text)
    except (TypeError, ValueError):
        target, retry = None, None
    return target_from_document(target), retry_from_document(retry)


class ClaimOpener:
    def __init__(self, box: SecretBox, capacity: int = CAPACITY) -> None:
        self._box = box
        self._capacity = capacity
        self._states: dict[uuid.UUID, tuple[_Version, DeliveryState | None]] = {}

    async def prepare(self, rows: Sequence[asyncpg.Record]) -> None:
        """Load the data keys of the tenants whose schedules will be opened (one round
        trip, only for tenants this replica has not seen)."""
        states = self._states
        tenants = {row["tenant_id"] for row in rows
                   if row["status"] == RunStatus.RUNNING and row["schedule_id"] not in states}
        if tenants:
            await self._box.load(tenants)

    def state(self, row: asyncpg.Record) -> DeliveryState | None:
        """(target, retry, signing secrets) in clear, or None when a sealed value does not
        open: such a run is not delivered (never signed with a guess)."""
        schedule_id: uuid.UUID = row["schedule_id"]
        version: _Version = (row["target_json"], row["retry_json"], row["signing_secret"],
                             row["previous_signing_secret"])
        kept = self._states.get(schedule_id)
        if kept is not None and kept[0] == version:
            return kept[1]
        opened = self._open(row["tenant_id"], schedule_id, version)
        if kept is None and len(self._states) >= self._capacity:
            del self._states[next(iter(self._states))]
        self._states[schedule_id] = (version, opened)
        return opened

    def _open(self, tenant_id: uuid.UUID, schedule_id: uuid.UUID,
              version: _Version) -> DeliveryState | None:
        target, retry = _policies(version[0], version[1])
        try:
            return (opened_target(self._box, tenant_id, schedule_id, target), retry,
                    opened_secrets(self._box, tenant_id, schedule_id, (version[2], version[3])))
        except SecretError as exc:
            log.error("schedule %s: its runs are not delivered: %s", schedule_id, exc)
            return None
