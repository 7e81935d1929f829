"""Alerts on Postgres, the tenant's side: the destination and the event history
(AlertStore). Every statement is confined to the caller's tenant. The dispatcher's side
is :mod:`.alert_outbox`; the transitions are decided in SQL (ADR 0036)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import asyncpg

from cronwire.adapters.postgres.audit_log import write_audit
from cronwire.adapters.postgres.driver_errors import storage_errors
from cronwire.adapters.postgres.sql import queries
from cronwire.domain.access import BY_SYSTEM, Change
from cronwire.domain.alerts import (
    AlertDestination,
    AlertEvent,
    EventAttempt,
)
from cronwire.domain.audit import SEALED, AuditEntry, diff
from cronwire.domain.keyset import HistoryPosition
from cronwire.domain.secrets import alert_secret_context
from cronwire.ports.secrets import SecretBox

Q = queries()
LATEST = HistoryPosition(datetime(9999, 12, 30, tzinfo=UTC), uuid.UUID(int=(1 << 128) - 1))
_EVENT_FIELDS = ("id", "tenant_id", "schedule_id", "schedule_name", "type", "run_id", "at",
                 "detail", "status", "attempt_count", "last_status_code", "last_error",
                 "delivered_at", "created_at")


def _destination(row: asyncpg.Record) -> AlertDestination:
    return AlertDestination(tenant_id=row["tenant_id"], url=row["url"],
                            events=tuple(row["events"]), created_at=row["created_at"],
                            updated_at=row["updated_at"], signing_secret=row["signing_secret"])


def event_of(row: asyncpg.Record) -> AlertEvent:
    values: dict[str, Any] = {name: row[name] for name in _EVENT_FIELDS}
    return AlertEvent(**values)


def _attempt(row: asyncpg.Record) -> EventAttempt:
    return EventAttempt(**{k: row[k] for k in (
        "attempt", "started_at", "finished_at", "outcome", "status_code", "error",
        "duration_ms", "response_excerpt")})


class PostgresAlertStore:
    """The destination's secret is stored sealed (``box``) and read in clear."""

    def __init__(self, pool: asyncpg.Pool, box: SecretBox) -> None:
        self._pool = pool
        self._box = box

    async def set_destination(self, tenant_id: uuid.UUID, url: str, events: Sequence[str],
                              signing_secret: str,
                              change: Change = BY_SYSTEM) -> AlertDestination:
        sealed = await self._box.seal(tenant_id, signing_secret, alert_secret_context())
        with storage_errors("setting the alert destination"):
            async with self._pool.acquire() as conn, conn.transaction():
                old = await conn.fetchrow(Q["tenant_alert_destination_lock"], tenant_id)
                row = await conn.fetchrow(Q["tenant_alert_destination_upsert"], tenant_id,
                                          url, list(events), sealed)
                before = None if old is None else {"url": old["url"],
                                                   "events": list(old["events"])}
                changes = {**diff(before, {"url": url, "events": list(events)}),
                           "signing_secret": [None if old is None else SEALED, SEALED]}
                await write_audit(conn, tenant_id, AuditEntry(
                    change, "alerts.update", "alert_destination", None, changes))
        assert row is not None
        return await self._opened(row)

    async def destination(self, tenant_id: uuid.UUID) -> AlertDestination | None:
        with storage_errors("reading the alert destination"):
            row = await self._pool.fetchrow(Q["tenant_alert_destination_get"], tenant_id)
        return None if row is None else await self._opened(row)

    async def _opened(self, row: asyncpg.Record) -> AlertDestination:
        found = _destination(row)
        secret = await self._box.unseal(found.tenant_id, found.signing_secret,
                                        alert_secret_context())
        return replace(found, signing_secret=secret)

    async def list_events(
        self, tenant_id: uuid.UUID, *, before: HistoryPosition | None, limit: int
    ) -> Sequence[tuple[AlertEvent, tuple[EventAttempt, ...]]]:
        key = before or LATEST
        with storage_errors("listing alert events"):
            async with self._pool.acquire() as conn:
                rows = await conn.fetch(Q["alert_event_list"], tenant_id, key.scheduled_for,
                                        key.id, limit)
                attempts = await conn.fetch(Q["alert_event_attempt_list"], tenant_id,
                                            [row["id"] for row in rows])
        by_event: dict[uuid.UUID, list[EventAttempt]] = {}
        for row in attempts:
            by_event.setdefault(row["event_id"], []).append(_attempt(row))
        return [(event_of(row), tuple(by_event.get(row["id"], ()))) for row in rows]
