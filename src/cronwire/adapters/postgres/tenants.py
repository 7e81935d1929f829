"""Tenants and their API tokens as the operator manages them (``cronwire tenant``).
Tokens are random, shown once, stored as SHA-256 (adapters/postgres/token_store.py); the
operator's issues and revocations are audited with the actor ``{"operator": "cli"}``."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import asyncpg

from cronwire.adapters.postgres.driver_errors import storage_errors
from cronwire.adapters.postgres.sql import queries
from cronwire.adapters.postgres.token_store import insert_token, revoke_token, token_record
from cronwire.domain.access import BY_OPERATOR, Scope, TokenRecord
from cronwire.domain.errors import NotFound

Q = queries()


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat().replace("+00:00", "Z")


@dataclass(frozen=True, slots=True)
class IssuedToken:
    tenant_id: uuid.UUID
    name: str
    token: str
    record: TokenRecord | None = None

    def as_json(self, *, detailed: bool = True) -> dict[str, Any]:
        """CONTRACT's ``{"tenant_id", "name", "token"}``; ``detailed`` adds the token's id,
        scope, name and expiry (``tenant token``; ``tenant create`` prints the contract's
        three keys alone, its token being admin and eternal)."""
        shown: dict[str, Any] = {"tenant_id": str(self.tenant_id), "name": self.name,
                                 "token": self.token}
        if detailed and self.record is not None:
            shown.update(token_id=str(self.record.id), scope=self.record.scope.value,
                         token_name=self.record.name,
                         expires_at=self.record.as_json()["expires_at"])
        return shown


@dataclass(frozen=True, slots=True)
class TenantSummary:
    id: uuid.UUID
    name: str
    created_at: datetime
    schedules: int
    live_tokens: int

    def as_json(self) -> dict[str, Any]:
        return {"id": str(self.id), "name": self.name, "created_at": _iso(self.created_at),
                "schedules": self.schedules, "live_tokens": self.live_tokens}


class PostgresTenantStore:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def create(self, name: str) -> IssuedToken:
        """A tenant and its first token, of scope admin."""
        tenant_id = uuid.uuid4()
        with storage_errors("creating a tenant"):
            async with self._pool.acquire() as conn, conn.transaction():
                await conn.execute(Q["tenant_insert"], tenant_id, name)
                record, token = await insert_token(conn, tenant_id, scope=Scope.ADMIN,
                                                   name=None, expires_at=None,
                                                   change=BY_OPERATOR)
        return IssuedToken(tenant_id, name, token, record)

    async def issue_token(self, tenant_id: uuid.UUID, *, scope: Scope = Scope.ADMIN,
                          name: str | None = None,
                          expires_in: timedelta | None = None) -> IssuedToken:
        """Another token for the tenant (no live-token cap: the operator decides)."""
        with storage_errors("issuing a token"):
            async with self._pool.acquire() as conn, conn.transaction():
                row = await conn.fetchrow(Q["tenant_get"], tenant_id)
                if row is None:
                    raise NotFound(f"tenant {tenant_id} does not exist")
                expires_at = None
                if expires_in is not None:
                    expires_at = await conn.fetchval(Q["database_now"]) + expires_in
                record, token = await insert_token(conn, tenant_id, scope=scope, name=name,
                                                   expires_at=expires_at, change=BY_OPERATOR)
        return IssuedToken(tenant_id, row["name"], token, record)

    async def list_tenants(self) -> list[TenantSummary]:
        with storage_errors("listing tenants"):
            rows = await self._pool.fetch(Q["tenant_list"])
        return [TenantSummary(**dict(row)) for row in rows]

    async def list_tokens(self, tenant_id: uuid.UUID) -> list[TokenRecord]:
        """The tenant's tokens, revoked ones included; NotFound for an unknown tenant."""
        with storage_errors("listing tokens"):
            async with self._pool.acquire() as conn:
                if await conn.fetchrow(Q["tenant_get"], tenant_id) is None:
                    raise NotFound(f"tenant {tenant_id} does not exist")
                rows = await conn.fetch(Q["api_token_list"], tenant_id)
        return [token_record(row) for row in rows]

    async def revoke(self, token_id: uuid.UUID) -> TokenRecord:
        """Revoke at once (idempotent); NotFound for an unknown token id."""
        with storage_errors("revoking a token"):
            async with self._pool.acquire() as conn, conn.transaction():
                row = await conn.fetchrow(Q["api_token_revoke"], token_id)
                return await revoke_token(conn, row, token_id, BY_OPERATOR)

    async def set_max_concurrency(self, tenant_id: uuid.UUID,
                                  limit: int | None) -> dict[str, Any]:
        """The tenant's own concurrency cap (None: the configured default); NotFound for an
        unknown tenant."""
        return await self._set_limit("tenant_set_max_concurrency", tenant_id, limit)

    async def set_max_pending_runs(self, tenant_id: uuid.UUID,
                                   limit: int | None) -> dict[str, Any]:
        """The tenant's own cap on its runs not yet ended (None: the configured default);
        NotFound for an unknown tenant."""
        return await self._set_limit("tenant_set_max_pending_runs", tenant_id, limit)

    async def _set_limit(self, query: str, tenant_id: uuid.UUID,
                         limit: int | None) -> dict[str, Any]:
        with storage_errors("setting a tenant's limit"):
            row = await self._pool.fetchrow(Q[query], tenant_id, limit)
        if row is None:
            raise NotFound(f"tenant {tenant_id} does not exist")
        return {"id": str(row["id"]), "name": row["name"],
                "max_concurrency": row["max_concurrency"],
                "max_pending_runs": row["max_pending_runs"]}
