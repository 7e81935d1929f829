"""The tenant's own tokens and its audit log: the use cases behind ``/v1/tokens`` and
``/v1/audit``."""

from __future__ import annotations

import uuid
from datetime import datetime

from cronwire.domain.access import Change, Scope, TokenRecord, check_token_name
from cronwire.domain.audit import AuditQuery, AuditRecord
from cronwire.domain.errors import RuleViolation
from cronwire.domain.keyset import Page, page_of
from cronwire.ports import AuditReader, TokenStore


async def issue_token(store: TokenStore, tenant: uuid.UUID, *, name: str, scope: Scope,
                      expires_at: datetime | None, change: Change) -> tuple[TokenRecord, str]:
    """A new token of ``scope``; ``expires_at``, if given, must lie ahead of the database's
    clock (a token born expired is a mistake, not a request)."""
    check_token_name("name", name)
    if expires_at is not None and expires_at <= await store.db_now():
        raise RuleViolation("expires_at", "must lie in the future")
    return await store.issue(tenant, name=name, scope=scope, expires_at=expires_at,
                             change=change)


async def list_tokens(store: TokenStore, tenant: uuid.UUID) -> list[TokenRecord]:
    return await store.list(tenant)


async def revoke_token(store: TokenStore, tenant: uuid.UUID, token_id: uuid.UUID,
                       change: Change) -> TokenRecord:
    return await store.revoke(tenant, token_id, change)


async def audit_page(log: AuditReader, tenant: uuid.UUID, query: AuditQuery) -> Page[AuditRecord]:
    """One page of the audit log, newest first (``query.limit`` rows at most)."""
    if query.since is not None and query.until is not None and query.since >= query.until:
        raise RuleViolation("until", "must be later than since")
    wider = AuditQuery(query.limit + 1, query.since, query.until, query.object_id,
                       query.action, query.before)
    return page_of(await log.list(tenant, wider), query.limit)
