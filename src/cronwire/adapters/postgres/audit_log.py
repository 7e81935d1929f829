"""The audit log in Postgres: written by the stores inside each change's transaction
(:func:`write_audit`), read by ``GET /v1/audit`` (:class:`PostgresAuditLog`)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import UTC, datetime

import asyncpg

from cronwire.adapters.postgres.driver_errors import storage_errors
from cronwire.adapters.postgres.sql import queries
from cronwire.domain.audit import AuditEntry, AuditQuery, AuditRecord

Q = queries()
# The keyset's start: after every row (the newest first walk begins here).
_LATEST = (datetime(9999, 12, 30, tzinfo=UTC), uuid.UUID(int=(1 << 128) - 1))


async def write_audit(conn: asyncpg.Connection, tenant_id: uuid.UUID, entry: AuditEntry) -> bool:
    """Insert ``entry`` on ``conn``, which must be inside the change's transaction: the
    row commits with the change or not at all. An empty diff writes nothing (False)."""
    if not entry.changes:
        return False
    change = entry.change
    await conn.execute(Q["audit_event_insert"], tenant_id, change.actor.as_document(),
                       entry.action, entry.object_type, entry.object_id,
                       change.request_id, change.client_address, entry.changes)
    return True


async def write_audits(conn: asyncpg.Connection, tenant_id: uuid.UUID,
                       entries: Sequence[AuditEntry]) -> None:
    """:func:`write_audit` for many changes of one statement (a bulk replay)."""
    rows = [(tenant_id, e.change.actor.as_document(), e.action, e.object_type, e.object_id,
             e.change.request_id, e.change.client_address, e.changes)
            for e in entries if e.changes]
    if rows:
        await conn.executemany(Q["audit_event_insert"], rows)


def _record(row: asyncpg.Record) -> AuditRecord:
    return AuditRecord(**{name: row[name] for name in (
        "id", "at", "actor", "action", "object_type", "object_id", "request_id",
        "client_address", "changes")})


class PostgresAuditLog:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def list(self, tenant_id: uuid.UUID, query: AuditQuery) -> Sequence[AuditRecord]:
        at, last_id = ((query.before.scheduled_for, query.before.id) if query.before
                       else _LATEST)
        with storage_errors("reading the audit log"):
            rows = await self._pool.fetch(Q["audit_event_list"], tenant_id, query.since,
                                          query.until, query.object_id, query.action,
                                          at, last_id, query.limit)
        return [_record(row) for row in rows]
