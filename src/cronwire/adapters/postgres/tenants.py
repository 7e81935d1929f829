"""Tenants and API tokens in Postgres. Tokens are random, shown once, stored as SHA-256."""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import uuid
from dataclasses import dataclass

import asyncpg

from cronwire.adapters.postgres.driver_errors import storage_errors
from cronwire.adapters.postgres.sql import queries
from cronwire.errors import NotFound

Q = queries("tenant")
TOKEN_PREFIX = "cwt_"


def new_token() -> str:
    return TOKEN_PREFIX + base64.urlsafe_b64encode(secrets.token_bytes(32)).decode().rstrip("=")


def token_hash(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8")).digest()


@dataclass(frozen=True, slots=True)
class IssuedToken:
    tenant_id: uuid.UUID
    name: str
    token: str

    def as_json(self) -> dict[str, str]:
        return {"tenant_id": str(self.tenant_id), "name": self.name, "token": self.token}


class PostgresTenantStore:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def create(self, name: str) -> IssuedToken:
        token = new_token()
        tenant_id = uuid.uuid4()
        async with self._pool.acquire() as conn, conn.transaction():
            await conn.execute(Q["tenant_insert"], tenant_id, name)
            await conn.execute(Q["api_token_insert"], token_hash(token), tenant_id)
        return IssuedToken(tenant_id, name, token)

    async def issue_token(self, tenant_id: uuid.UUID) -> IssuedToken:
        token = new_token()
        async with self._pool.acquire() as conn, conn.transaction():
            row = await conn.fetchrow(Q["tenant_get"], tenant_id)
            if row is None:
                raise NotFound(f"tenant {tenant_id} does not exist")
            await conn.execute(Q["api_token_insert"], token_hash(token), tenant_id)
        return IssuedToken(tenant_id, row["name"], token)

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
