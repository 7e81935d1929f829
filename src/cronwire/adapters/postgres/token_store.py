"""API tokens in Postgres: what a bearer token grants (read on every request), the
tenant's own token management (``/v1/tokens``) and the operator's (``cronwire tenant``).

Issuing and revoking write their audit row in the same transaction. ``last_used_at`` is
kept off the request's path: a lookup that finds it a minute old queues the token, and
one background statement per batch writes the queued tokens (each at most once a minute,
whichever replica writes it), so a burst of requests costs one UPDATE, not one each.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import logging
import secrets
import time
import uuid
from datetime import datetime

import asyncpg

from cronwire.adapters.postgres.audit_log import write_audit
from cronwire.adapters.postgres.driver_errors import storage_errors
from cronwire.adapters.postgres.sql import queries
from cronwire.domain.access import MAX_LIVE_TOKENS, Change, Grant, Scope, TokenRecord
from cronwire.domain.audit import AuditEntry, diff
from cronwire.domain.errors import LimitExceeded, NotFound

Q = queries()
log = logging.getLogger(__name__)
TOKEN_PREFIX = "cwt_"
# Characters of a token kept in clear so its holder can recognise it in `tenant tokens`
# ("cwt_" and 6 of its 43 random characters: 36 of 256 bits shown).
SHOWN_PREFIX_CHARS = len(TOKEN_PREFIX) + 6
TOUCH_EVERY_SECONDS = 60.0
TOUCH_BATCH_DELAY_SECONDS = 1.0  # requests in this second share one UPDATE
MAX_REMEMBERED = 100_000  # tokens whose last queueing a replica remembers
_RECORD_FIELDS = ("id", "tenant_id", "prefix", "name", "created_at", "expires_at",
                  "last_used_at", "revoked_at")


def new_token() -> str:
    return TOKEN_PREFIX + base64.urlsafe_b64encode(secrets.token_bytes(32)).decode().rstrip("=")


def token_hash(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8")).digest()


def token_record(row: asyncpg.Record) -> TokenRecord:
    return TokenRecord(scope=Scope(row["scope"]), **{k: row[k] for k in _RECORD_FIELDS})


def _fields(record: TokenRecord) -> dict[str, object]:
    doc = record.as_json()
    return {k: doc[k] for k in ("name", "scope", "expires_at", "revoked_at")}


async def insert_token(conn: asyncpg.Connection, tenant_id: uuid.UUID, *, scope: Scope,
                       name: str | None, expires_at: datetime | None,
                       change: Change) -> tuple[TokenRecord, str]:
    """A new token and its audit row (token.create), on ``conn`` inside a transaction."""
    token = new_token()
    row = await conn.fetchrow(Q["api_token_insert"], token_hash(token), tenant_id,
                              token[:SHOWN_PREFIX_CHARS], scope.value, name, expires_at)
    record = token_record(row)
    await write_audit(conn, tenant_id, AuditEntry(change, "token.create", "token",
                                                  str(record.id), diff(None, _fields(record))))
    return record, token


async def revoke_token(conn: asyncpg.Connection, row: asyncpg.Record | None,
                       token_id: uuid.UUID, change: Change) -> TokenRecord:
    """The revoked token from an api_token_revoke* row, audited (token.revoke) only if
    this revoked it; NotFound for no row."""
    if row is None:
        raise NotFound(f"token {token_id} does not exist")
    record = token_record(row)
    if row["was_live"]:
        await write_audit(conn, record.tenant_id, AuditEntry(
            change, "token.revoke", "token", str(record.id),
            {"revoked_at": [None, record.as_json()["revoked_at"]]}))
    return record


class LastUsedWriter:
    """Queues tokens whose last_used_at is due and writes them in batches, off the
    request's path; a replica queues each token at most once a minute."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool
        self._queued: dict[uuid.UUID, float] = {}  # token -> when this replica queued it
        self._pending: set[uuid.UUID] = set()
        self._task: asyncio.Task[None] | None = None
        self.written = 0  # test signal: tokens written by finished batches

    def note(self, token_id: uuid.UUID) -> None:
        now = time.monotonic()
        if now - self._queued.get(token_id, -TOUCH_EVERY_SECONDS) < TOUCH_EVERY_SECONDS:
            return
        self._queued[token_id] = now
        if len(self._queued) > MAX_REMEMBERED:  # forget the entries older than a minute
            self._queued = {k: v for k, v in self._queued.items()
                            if now - v < TOUCH_EVERY_SECONDS}
        self._pending.add(token_id)
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._flush())

    async def _flush(self) -> None:
        await asyncio.sleep(TOUCH_BATCH_DELAY_SECONDS)
        batch, self._pending = list(self._pending), set()
        try:
            await self._pool.execute(Q["api_token_touch"], batch)
            self.written += len(batch)
        except (asyncpg.PostgresError, OSError, asyncpg.InterfaceError) as exc:
            # Best effort: the next use a minute on queues it again.
            log.warning("last_used_at of %d tokens not written: %s", len(batch), exc)
            for token_id in batch:
                self._queued.pop(token_id, None)

    async def drain(self) -> None:
        """Wait for the batch in progress (tests; a clean stop)."""
        if self._task is not None:
            await asyncio.shield(self._task)


class PostgresTokenStore:
    """TokenVerifier and TokenStore (ports.tenant) over api_token."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool
        self.last_used = LastUsedWriter(pool)

    async def grant_for_token(self, token: str) -> Grant | None:
        """What ``token`` grants, or None. The lookup is by hash; the final comparison is
        constant-time so response timing says nothing about near-miss hashes."""
        digest = token_hash(token)
        with storage_errors("looking up an API token"):
            row = await self._pool.fetchrow(Q["api_token_grant"], digest)
        if row is None or not hmac.compare_digest(bytes(row["token_hash"]), digest):
            return None
        if row["use_due"] and not row["expired"]:
            self.last_used.note(row["id"])
        return Grant(row["tenant_id"], row["id"], row["name"], Scope(row["scope"]),
                     row["expired"], row["expires_at"])

    async def issue(self, tenant_id: uuid.UUID, *, name: str, scope: Scope,
                    expires_at: datetime | None, change: Change) -> tuple[TokenRecord, str]:
        with storage_errors("issuing a token"):
            async with self._pool.acquire() as conn, conn.transaction():
                if await conn.fetchrow(Q["tenant_lock_tokens"], tenant_id) is None:
                    raise NotFound(f"tenant {tenant_id} not found")
                live = await conn.fetchval(Q["api_token_count_live"], tenant_id)
                if live >= MAX_LIVE_TOKENS:
                    raise LimitExceeded("max_tokens", None,
                                        f"this tenant already has {live} live tokens "
                                        f"(limit {MAX_LIVE_TOKENS}); revoke one first")
                return await insert_token(conn, tenant_id, scope=scope, name=name,
                                          expires_at=expires_at, change=change)

    async def list(self, tenant_id: uuid.UUID) -> list[TokenRecord]:
        with storage_errors("listing tokens"):
            rows = await self._pool.fetch(Q["api_token_list_live"], tenant_id)
        return [token_record(row) for row in rows]

    async def revoke(self, tenant_id: uuid.UUID, token_id: uuid.UUID,
                     change: Change) -> TokenRecord:
        with storage_errors("revoking a token"):
            async with self._pool.acquire() as conn, conn.transaction():
                row = await conn.fetchrow(Q["api_token_revoke_own"], tenant_id, token_id)
                return await revoke_token(conn, row, token_id, change)

    async def db_now(self) -> datetime:
        with storage_errors("reading the database clock"):
            now: datetime = await self._pool.fetchval(Q["database_now"])
        return now
