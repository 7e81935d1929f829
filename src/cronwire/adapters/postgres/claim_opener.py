"""What a claimed run needs to leave, parsed and opened once per schedule version (ADR 0061:
the hot path does not pay for sealing per run).

A claim row carries the schedule's stored target, retry policy and sealed signing secrets.
Their text is the version: a PATCH re-seals the target's sealed members and a rotation
seals a new secret (fresh nonces, so new text), and the previous secret's expiry turns its
column to NULL. So an opened value is reused while the text it was opened from is the one
the row carries, and opened again the moment it changes; nothing invalidates it by hand.

The memos are keyed by (the schedule id's integer, the sealed text) and hold only strings,
integers and the opened Target: tuples of atomic values the garbage collector stops
tracking after one pass. A burst of 100,000 distinct schedules fills them once and would
otherwise leave several hundred thousand tracked tuples for every full collection to walk
(measured: that walk was half of the claim's extra cost per row; ADR 0061). The signing
secrets and the target are kept apart, so a schedule without sealed target members (the
burst's) keeps nothing but its secrets, and a PATCH of a header does not reopen them.
"""

from __future__ import annotations

import functools
import json
import logging
import uuid
from collections.abc import Sequence
from typing import TypeVar

import asyncpg

from cronwire.adapters.postgres.sealed_fields import (
    has_sealed_members,
    opened_target,
)
from cronwire.domain.documents import retry_from_document, target_from_document
from cronwire.domain.model import RetryPolicy, RunStatus, Target
from cronwire.domain.secrets import SecretError, schedule_secret_context
from cronwire.ports.secrets import SecretBox

log = logging.getLogger(__name__)

# Versions whose opened values are kept, per memo; beyond it the oldest is dropped (opened
# again if it comes back). 100,000 schedules' secrets are about 20 MB.
CAPACITY = 131_072

DeliveryState = tuple[Target, RetryPolicy, tuple[str, ...]]
_SecretsKey = tuple[int, str, str | None]
_TargetKey = tuple[int, str]
K = TypeVar("K")
V = TypeVar("V")


@functools.lru_cache(maxsize=4096)
def _policies(text: str, retry_text: str) -> tuple[Target, RetryPolicy]:
    """Memoised on the documents' text: schedules sharing a target and policy are parsed
    once. Both results are treated as immutable by every caller."""
    try:
        target, retry = json.loads(text), json.loads(retry_text)
    except (TypeError, ValueError):
        target, retry = None, None
    return target_from_document(target), retry_from_document(retry)


def _keep(memo: dict[K, V], key: K, value: V, capacity: int) -> None:
    if memo and len(memo) >= capacity:
        del memo[next(iter(memo))]  # the oldest: dicts keep insertion order
    memo[key] = value


class ClaimOpener:
    def __init__(self, box: SecretBox, capacity: int = CAPACITY) -> None:
        self._box = box
        self._capacity = capacity
        self._secrets: dict[_SecretsKey, tuple[str, ...] | None] = {}
        self._targets: dict[_TargetKey, Target | None] = {}

    async def prepare(self, rows: Sequence[asyncpg.Record]) -> None:
        """Load the data keys of the tenants whose runs will be opened (one round trip, only
        for tenants this replica has not loaded; the box skips those it has)."""
        tenants = {row["tenant_id"] for row in rows if row["status"] == RunStatus.RUNNING}
        if tenants:
            await self._box.load(tenants)

    def state(self, row: asyncpg.Record) -> DeliveryState | None:
        """(target, retry, signing secrets) in clear, or None when a sealed value does not
        open: such a run is not delivered (never signed with a guess)."""
        schedule_id: uuid.UUID = row["schedule_id"]
        number = schedule_id.int
        current: str | None = row["signing_secret"]
        previous: str | None = row["previous_signing_secret"]
        key = (number, current or "", previous)
        if key in self._secrets:
            secrets = self._secrets[key]
        else:
            secrets = self._opened_secrets(row["tenant_id"], schedule_id, current, previous)
            _keep(self._secrets, key, secrets, self._capacity)
        if secrets is None:
            return None
        text: str = row["target_json"]
        target: Target | None
        target, retry = _policies(text, row["retry_json"])
        if has_sealed_members(target):
            target_key = (number, text)
            if target_key in self._targets:
                target = self._targets[target_key]
            else:
                target = self._opened_target(row["tenant_id"], schedule_id, target)
                _keep(self._targets, target_key, target, self._capacity)
            if target is None:
                return None
        return target, retry, secrets

    def _opened_secrets(self, tenant_id: uuid.UUID, schedule_id: uuid.UUID,
                        current: str | None, previous: str | None) -> tuple[str, ...] | None:
        if not current:
            return ()
        # sealed_fields.opened_secrets, inlined: a burst of distinct schedules comes here
        # for every run, and each call layer is a tenth of a µs of a few µs.
        unseal, context = self._box.unseal_loaded, schedule_secret_context(schedule_id)
        try:
            if not previous:
                return (unseal(tenant_id, current, context),)
            return (unseal(tenant_id, current, context), unseal(tenant_id, previous, context))
        except SecretError as exc:
            log.error("schedule %s: its runs are not delivered: %s", schedule_id, exc)
            return None

    def _opened_target(self, tenant_id: uuid.UUID, schedule_id: uuid.UUID,
                       target: Target) -> Target | None:
        try:
            return opened_target(self._box, tenant_id, schedule_id, target)
        except SecretError as exc:
            log.error("schedule %s: its runs are not delivered: %s", schedule_id, exc)
            return None
