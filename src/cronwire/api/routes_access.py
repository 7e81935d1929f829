"""`/v1/tokens` (the tenant's own tokens) and `/v1/audit` (who changed what): admin only."""

# No "from __future__ import annotations": FastAPI must see the real types of the
# handlers' parameters, and the caller aliases are local to the factories.
import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Response, Security

from cronwire.api.auth import Caller, caller_dependency, request_authenticator
from cronwire.api.context import ApiContext
from cronwire.api.errors import responses
from cronwire.api.limits import capped_route
from cronwire.api.schemas_access import AuditPage, TokenCreated, TokenIn, TokenList
from cronwire.api.schemas_common import Instant
from cronwire.domain.access import Scope, TokenRecord
from cronwire.domain.audit import AuditQuery, AuditRecord
from cronwire.domain.keyset import HistoryPosition, decode_run_cursor, encode_run_cursor
from cronwire.service import access_commands

TokenId = Annotated[uuid.UUID, Path(alias="id", description="The token's id.")]
MAX_AUDIT_PAGE = 200


def token_out(record: TokenRecord) -> dict[str, Any]:
    return {"id": str(record.id), "name": record.name, "scope": record.scope.value,
            "prefix": record.prefix, "created_at": record.created_at,
            "expires_at": record.expires_at, "last_used_at": record.last_used_at}


def audit_out(record: AuditRecord) -> dict[str, Any]:
    return {"id": str(record.id), "at": record.at, "actor": record.actor,
            "action": record.action, "object_type": record.object_type,
            "object_id": record.object_id, "request_id": record.request_id,
            "client_address": record.client_address, "changes": record.changes}


def tokens_router(ctx: ApiContext) -> APIRouter:
    router = APIRouter(prefix="/v1/tokens", tags=["tokens"],
                       route_class=capped_route(ctx.max_request_bytes,
                                               request_authenticator(ctx.tokens)))
    authenticated = caller_dependency(ctx.tokens, ctx.rate_limit)
    Admin = Annotated[Caller, Security(authenticated, scopes=[Scope.ADMIN])]

    @router.post("", status_code=201, response_model=TokenCreated,
                 responses=responses(413, 422),
                 summary="Issue a token (shown only here) of scope read, write or admin")
    async def create(body: TokenIn, caller: Admin) -> dict[str, Any]:
        record, token = await access_commands.issue_token(
            ctx.tokens, caller.tenant_id, name=body.name, scope=Scope(body.scope),
            expires_at=body.expires_at, change=caller.change)
        return {**token_out(record), "token": token}

    @router.get("", response_model=TokenList, responses=responses(),
                summary="The tenant's tokens not revoked (expired ones included)")
    async def list_tokens(caller: Admin) -> dict[str, Any]:
        found = await access_commands.list_tokens(ctx.tokens, caller.tenant_id)
        return {"items": [token_out(r) for r in found]}

    @router.delete("/{id}", status_code=204, response_class=Response,
                   responses=responses(404, 422),
                   summary="Revoke a token at once (every replica, next request)")
    async def revoke(token_id: TokenId, caller: Admin) -> Response:
        await access_commands.revoke_token(ctx.tokens, caller.tenant_id, token_id,
                                           caller.change)
        return Response(status_code=204)

    return router


def audit_router(ctx: ApiContext) -> APIRouter:
    router = APIRouter(prefix="/v1/audit", tags=["audit"],
                       route_class=capped_route(ctx.max_request_bytes,
                                               request_authenticator(ctx.tokens)))
    authenticated = caller_dependency(ctx.tokens, ctx.rate_limit)
    Admin = Annotated[Caller, Security(authenticated, scopes=[Scope.ADMIN])]
    assert ctx.audit is not None
    log = ctx.audit

    @router.get("", response_model=AuditPage, responses=responses(422),
                summary="Every change, newest first (keyset pages)",
                description="One entry per change made through the API or `cronwire "
                "tenant`, written in the change's own transaction. `changes` maps each "
                "field to `[before, after]`; header values and secrets read `\"***\"`.")
    async def list_audit(
        caller: Admin,
        since: Annotated[Instant | None, Query(description="Inclusive lower bound on at.")] = None,
        until: Annotated[Instant | None, Query(description="Exclusive upper bound on at.")] = None,
        object_id: Annotated[str | None, Query(
            pattern=r"^[A-Za-z0-9._-]{1,64}$", description="Only this object's entries.")] = None,
        action: Annotated[str | None, Query(
            pattern=r"^[a-z_]{1,32}\.[a-z_]{1,32}$", examples=["schedule.update"],
            description="Only this action's entries.")] = None,
        limit: Annotated[int, Query(ge=1, le=MAX_AUDIT_PAGE)] = 50,
        cursor: Annotated[str | None, Query(max_length=200)] = None,
    ) -> dict[str, Any]:
        query = AuditQuery(limit, since, until, object_id, action,
                           decode_run_cursor(cursor) if cursor else None)
        page = await access_commands.audit_page(log, caller.tenant_id, query)
        last = page.items[-1] if page.items else None
        return {"items": [audit_out(r) for r in page.items],
                "next_cursor": encode_run_cursor(HistoryPosition(last.at, last.id))
                if page.more and last else None}

    return router
