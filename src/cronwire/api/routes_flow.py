"""`/v1/flow-control`: the tenant's flow-control keys as they stand (ADR 0040)."""

# No "from __future__ import annotations": FastAPI must see the real types of the
# handlers' parameters, and the Tenant dependency alias is local to the factory.
from typing import Annotated, Any

from fastapi import APIRouter, Query, Security

from cronwire.api.auth import Caller, caller_dependency, request_authenticator
from cronwire.api.context import ApiContext
from cronwire.api.errors import responses
from cronwire.api.limits import capped_route
from cronwire.api.schemas_flow import FlowControlPage
from cronwire.api.text import Text
from cronwire.domain.access import Scope
from cronwire.domain.flow_control import MAX_KEY_CHARS

MAX_KEYS = 1000


def flow_router(ctx: ApiContext) -> APIRouter:
    assert ctx.flows is not None
    flows = ctx.flows
    router = APIRouter(prefix="/v1/flow-control", tags=["flow control"],
                       route_class=capped_route(ctx.max_request_bytes,
                                               request_authenticator(ctx.tokens)))
    authenticated = caller_dependency(ctx.tokens, ctx.rate_limit)
    # Each handler's caller parameter declares the scope it needs (CONTRACT: read every
    # GET; write every change to schedules and runs; admin tokens, alerts, audit).
    Reader = Annotated[Caller, Security(authenticated, scopes=[Scope.READ])]

    @router.get("", response_model=FlowControlPage, responses=responses(422),
                summary="The tenant's flow-control keys: limits, in flight, waiting, held")
    async def list_keys(
        caller: Reader, limit: Annotated[int, Query(ge=1, le=MAX_KEYS)] = MAX_KEYS,
        key: Annotated[Text | None, Query(min_length=1, max_length=MAX_KEY_CHARS,
                                         description="Only this key (a schedule's "
                                         "flow_control.key).")] = None,
    ) -> dict[str, Any]:
        keys = await flows.keys(caller.tenant_id, limit, key)
        return {"items": [
            {"key": k.key, "max_concurrency": k.max_concurrency,
             "rate_per_second": k.rate_per_second, "in_flight": k.in_flight,
             "waiting": k.waiting, "held_until": k.held_until}
            for k in keys]}

    return router
