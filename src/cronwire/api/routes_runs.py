"""`/v1/runs`: the tenant's run history, newest first, and one run with its evidence,
each through a use case of service/run_queries.py."""

# No "from __future__ import annotations": FastAPI must see the real types of the
# handlers' parameters, and the Tenant dependency alias is local to the factory.
import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Security

from cronwire.api.auth import Caller, caller_dependency, request_authenticator
from cronwire.api.context import ApiContext
from cronwire.api.errors import responses
from cronwire.api.limits import capped_route
from cronwire.api.mapping import run_detail_out, run_out
from cronwire.api.schemas_commands import ReplayIn, ReplayOut
from cronwire.api.schemas_common import Instant
from cronwire.api.schemas_runs import RunDetailOut, RunOut, RunPage, RunStatusName
from cronwire.domain.access import Scope
from cronwire.domain.history import MAX_PAGE, RunQuery
from cronwire.domain.keyset import decode_run_cursor, encode_run_cursor
from cronwire.domain.model import RunStatus
from cronwire.domain.replay import MAX_REPLAY, ReplayQuery
from cronwire.service import run_commands, run_queries

RunId = Annotated[uuid.UUID, Path(alias="id", description="The run's id.")]
REPLAY_HELP = (
    "A replay is a new run (`trigger: \"replay\"`, `replay_of`: the failed run) due now, "
    "with a new `webhook-id` (it is meant to be processed again); the delivery carries the "
    "original occurrence in `x-cronwire-scheduled-for` and the default body. Its own "
    "`scheduled_for` is the instant it was made (never a whole second, so never an "
    "occurrence's slot). A failed run is replayed once; a replay that fails can be replayed.")


def runs_router(ctx: ApiContext) -> APIRouter:
    router = APIRouter(prefix="/v1/runs", tags=["runs"],
                       route_class=capped_route(ctx.max_request_bytes,
                                               request_authenticator(ctx.tokens)))
    authenticated = caller_dependency(ctx.tokens, ctx.rate_limit)
    # Each handler's caller parameter declares the scope it needs (CONTRACT: read every
    # GET; write every change to schedules and runs; admin tokens, alerts, audit).
    Reader = Annotated[Caller, Security(authenticated, scopes=[Scope.READ])]
    Writer = Annotated[Caller, Security(authenticated, scopes=[Scope.WRITE])]

    @router.get("", response_model=RunPage, responses=responses(422),
                summary="Run history, newest scheduled_for first (keyset pages)")
    async def list_runs(
        caller: Reader,
        schedule_id: uuid.UUID | None = None,
        status: RunStatusName | None = None,
        since: Annotated[Instant | None,
                         Query(description="Inclusive lower bound on scheduled_for.")] = None,
        until: Annotated[Instant | None,
                         Query(description="Exclusive upper bound on scheduled_for.")] = None,
        limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 50,
        cursor: Annotated[str | None, Query(max_length=200)] = None,
    ) -> dict[str, Any]:
        query = RunQuery(
            limit=limit, schedule_id=schedule_id,
            status=RunStatus(status) if status else None, since=since, until=until,
            before=decode_run_cursor(cursor) if cursor else None,
        )
        page = await run_queries.list_runs(ctx.runs, caller.tenant_id, query)
        return {"items": [run_out(run) for run in page.items],
                "next_cursor": encode_run_cursor(page.items[-1].position) if page.more else None}

    @router.get("/{id}", response_model=RunDetailOut, responses=responses(404, 422),
                summary="One run with its delivery attempts")
    async def get_run(run_id: RunId, caller: Reader) -> dict[str, Any]:
        return run_detail_out(await run_queries.get_run(ctx.runs, caller.tenant_id, run_id))

    @router.post("/replay", status_code=202, response_model=ReplayOut,
                 responses=responses(422), summary="Replay the dead letters (failed runs)",
                 description=f"Replays this tenant's failed runs not replayed yet (of live "
                 f"schedules; optionally one schedule, a scheduled_for window), oldest "
                 f"first, at most `limit` (1..{MAX_REPLAY:,}, default 100); call again for "
                 "more. " + REPLAY_HELP)
    async def replay_failed(body: ReplayIn, caller: Writer) -> dict[str, Any]:
        query = ReplayQuery(limit=body.limit, schedule_id=body.schedule_id, since=body.since,
                            until=body.until)
        replayed = await run_commands.replay_failed(ctx.commands, ctx.default_limits,
                                                   caller.tenant_id, query, caller.change)
        return {"replayed": len(replayed), "runs": replayed}

    @router.post("/{id}/replay", status_code=202, response_model=RunOut,
                 responses=responses(404, 409, 422), summary="Replay one failed run",
                 description=REPLAY_HELP + " 409 if the run did not fail, was replayed "
                 "already, or its schedule was deleted.")
    async def replay(run_id: RunId, caller: Writer) -> dict[str, Any]:
        return run_out(await run_commands.replay(ctx.commands, ctx.default_limits,
                                                 caller.tenant_id, run_id, caller.change))

    return router
