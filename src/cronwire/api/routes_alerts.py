"""`/v1/alerts`: the tenant's alert destination, and the alert events with their delivery."""

# No "from __future__ import annotations": FastAPI must see the real types of the
# handlers' parameters, and the Tenant dependency alias is local to the factory.
import dataclasses
import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Query, Security

from cronwire.api.auth import Caller, caller_dependency, request_authenticator
from cronwire.api.context import ApiContext
from cronwire.api.errors import responses
from cronwire.api.limits import capped_route
from cronwire.api.schemas_observability import AlertEventPage, AlertsOut, AlertsPut, AlertsSet
from cronwire.domain.access import Scope
from cronwire.domain.alerts import AlertDestination
from cronwire.domain.keyset import HistoryPosition, decode_run_cursor, encode_run_cursor
from cronwire.service import alert_commands


def _destination_out(found: AlertDestination) -> dict[str, Any]:
    return {"url": found.url, "events": list(found.events), "created_at": found.created_at,
            "updated_at": found.updated_at}


def alerts_router(ctx: ApiContext) -> APIRouter:
    router = APIRouter(prefix="/v1/alerts", tags=["alerts"],
                       route_class=capped_route(ctx.max_request_bytes,
                                               request_authenticator(ctx.tokens)))
    authenticated = caller_dependency(ctx.tokens, ctx.rate_limit)
    # Each handler's caller parameter declares the scope it needs (CONTRACT: read every
    # GET; admin the alert destination).
    Reader = Annotated[Caller, Security(authenticated, scopes=[Scope.READ])]
    Admin = Annotated[Caller, Security(authenticated, scopes=[Scope.ADMIN])]
    assert ctx.alerts is not None
    store = ctx.alerts

    @router.put("", response_model=AlertsSet, responses=responses(413, 422),
                summary="Set the alert destination (its signing secret is shown only here)")
    async def put(body: AlertsPut, caller: Admin) -> dict[str, Any]:
        found = await alert_commands.set_destination(store, ctx.check_url, caller.tenant_id,
                                                     body.url, body.events, caller.change)
        return {**_destination_out(found), "signing_secret": found.signing_secret}

    @router.get("", response_model=AlertsOut, responses=responses(404),
                summary="The alert destination (404 until one is set)")
    async def get(caller: Reader) -> dict[str, Any]:
        return _destination_out(await alert_commands.destination(store, caller.tenant_id))

    @router.get("/events", response_model=AlertEventPage, responses=responses(422),
                summary="Alert events, newest first, with their delivery attempts")
    async def events(
        caller: Reader,
        limit: Annotated[int, Query(ge=1, le=200)] = 50,
        cursor: Annotated[str | None, Query(max_length=200)] = None,
    ) -> dict[str, Any]:
        page = await alert_commands.list_events(
            store, caller.tenant_id, before=decode_run_cursor(cursor) if cursor else None,
            limit=limit)
        items = [{**{k: (str(v) if isinstance(v, uuid.UUID) else v)
                     for k, v in dataclasses.asdict(event).items()},
                  "attempts": [dataclasses.asdict(a) for a in attempts]}
                 for event, attempts in page.items]
        last = page.items[-1][0] if page.items else None
        return {"items": items,
                "next_cursor": encode_run_cursor(HistoryPosition(last.created_at, last.id))
                if page.more and last else None}

    return router
