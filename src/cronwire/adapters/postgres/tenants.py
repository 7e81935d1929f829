"""Tenants and API tokens in Postgres. Tokens are random, shown once, stored as SHA-256."""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg

from cronwire.adapters.postgres.driver_errors import storage_errors
from cronwire.adapters.postgres.sql import queries
from cronwire.domain.errors import NotFound

Q = queries()
TOKEN_PREFIX = "cwt_"
# Characters of a token kept in clear so its holder can recognise it in `tenant tokens`
# ("cwt_" and 6 of its 43 random characters: 36 of 256 bits shown).
SHOWN_PREFIX_CHARS = len(TOKEN_PREFIX) + 6


def new_token() -> str:
    return TOKEN_PREFIX + base64.urlsafe_b64encode(secrets.token_bytes(32)).decode().rstrip("=")


def token_hash(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8")).digest()


def shown_prefix(token: str) -> str:
    return token[:SHOWN_PREFIX_CHARS]


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat().replace("+00:00", "Z")


@dataclass(frozen=True, slots=True)
class IssuedToken:
    tenant_id: uuid.UUID
    name: str
    token: str

    def as_json(self) -> dict[str, str]:
        return {"tenant_id": str(self.tenant_id), "name": self.name, "token": self.token}


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


@dataclass(frozen=True, slots=True)
class TokenRecord:
    """What an operator may see of a token: never the token, never its hash."""

    id: uuid.UUID
    tenant_id: uuid.UUID
    prefix: str | None
    created_at: datetime
    revoked_at: datetime | None

    def as_json(self) -> dict[str, Any]:
        return {"id": str(self.id), "tenant_id": str(self.tenant_id), "prefix": self.prefix,
                "created_at": _iso(self.created_at), "revoked_at": _iso(self.revoked_at)}


class PostgresTenantStore:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def create(self, name: str) -> IssuedToken:
        token = new_token()
        tenant_id = uuid.uuid4()
        with storage_errors("creating a tenant"):
            async with self._pool.acquire() as conn, conn.transaction():
                await conn.execute(Q["tenant_insert"], tenant_id, name)
                await conn.execute(Q["api_token_insert"], token_hash(token), tenant_id,
                                   shown_prefix(token))
        return IssuedToken(tenant_id, name, token)

    async def issue_token(self, tenant_id: uuid.UUID) -> IssuedToken:
        token = new_token()
        with storage_errors("issuing a token"):
            async with self._pool.acquire() as conn, conn.transaction():
                row = await conn.fetchrow(Q["tenant_get"], tenant_id)
                if row is None:
                    raise NotFound(f"tenant {tenant_id} does not exist")
                await conn.execute(Q["api_token_insert"], token_hash(token), tenant_id,
                                   shown_prefix(token))
        return IssuedToken(tenant_id, row["name"], token)

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
        return [TokenRecord(**dict(row)) for row in rows]

    async def revoke(self, token_id: uuid.UUID) -> TokenRecord:
        """Revoke at once (idempotent); NotFound for an unknown token id."""
        with storage_errors("revoking a token"):
            row = await self._pool.fetchrow(Q["api_token_revoke"], token_id)
        if row is None:
            raise NotFound(f"token {token_id} does not exist")
        return TokenRecord(**dict(row))

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

    async def tenant_for_token(self, token: str) -> uuid.UUID | None:
        """The token's tenant, or None. The lookup is by hash; the final comparison is
        constant-time so response timing says nothing about near-miss hashes."""
        digest = token_hash(token)
        with storage_errors("looking up an API token"):
            row = await self._pool.fetchrow(Q["api_token_tenant"], digest)
        if row is None or not hmac.compare_digest(bytes(row["token_hash"]), digest):
            return None
        tenant_id: uuid.UUID = row["id"]
        return tenant_id
