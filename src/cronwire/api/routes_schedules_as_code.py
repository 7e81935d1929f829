"""Schedules as code (ADR 0057): a schedule addressed by its `key` (PUT, GET,
DELETE `/v1/schedules/by-key/{key}`) and `POST /v1/schedules/apply`. Each handler calls
one use case of service/schedules_as_code.py; the rules are the domain's."""

# No "from __future__ import annotations": FastAPI must see the handlers' real types.
from typing import Annotated, Any

from fastapi import APIRouter, Path, Response, Security
from fastapi.responses import JSONResponse

from cronwire.api.auth import Caller, caller_dependency, request_authenticator
from cronwire.api.context import ApiContext
from cronwire.api.errors import responses
from cronwire.api.limits import capped_route
from cronwire.api.mapping import schedule_out, spec_from
from cronwire.api.schemas import ScheduleCreated, ScheduleOut
from cronwire.api.schemas_as_code import ApplyIn, ApplyOut, ScheduleDefinition
from cronwire.domain.access import Scope
from cronwire.domain.errors import DomainError
from cronwire.domain.schedule_keys import KEY_RULE
from cronwire.service import schedules_as_code as as_code

Key = Annotated[str, Path(description=f"The schedule's key (`{KEY_RULE}`).",
                          max_length=200)]


def definition_of(body: ScheduleDefinition, index: int | None = None) -> as_code.Definition:
    """The request's definition as the domain's (an enum value it refuses names the
    definition's index in an apply)."""
    try:
        spec = spec_from(body)
    except DomainError as exc:
        raise as_code.refused_at(index, getattr(body, "key", None), exc) from None
    return as_code.Definition(spec, body.paused)


def as_code_router(ctx: ApiContext) -> APIRouter:
    router = APIRouter(prefix="/v1/schedules", tags=["schedules"],
                       route_class=capped_route(ctx.max_request_bytes,
                                               request_authenticator(ctx.tokens)))
    applying = APIRouter(route_class=capped_route(ctx.max_apply_bytes,
                                                 request_authenticator(ctx.tokens)))
    authenticated = caller_dependency(ctx.tokens, ctx.rate_limit)
    # Each handler's caller declares the scope it needs (ADR 0056).
    Reader = Annotated[Caller, Security(authenticated, scopes=[Scope.READ])]
    Writer = Annotated[Caller, Security(authenticated, scopes=[Scope.WRITE])]

    @router.put("/by-key/{key}", response_model=ScheduleOut,
                responses={**responses(409, 413, 422),
                           201: {"model": ScheduleCreated,
                                 "description": "Created (with its signing secret, shown "
                                 "only here)."}},
                summary="Create (201) or replace (200) the schedule with this key",
                description="The body is the whole schedule (as POST /v1/schedules takes "
                "it; a field left out takes its default; `paused` left out keeps the pause "
                "as it is). A body equal to the stored schedule writes nothing: 200, "
                "`updated_at` unchanged. A header value sent as `\"***\"` keeps the stored "
                "value.")
    async def put_by_key(key: Key, body: ScheduleDefinition, caller: Writer) -> Any:
        record, created = await as_code.put_schedule(
            ctx.schedules, ctx.check_url, ctx.default_limits, caller.tenant_id, key,
            definition_of(body), ctx.cpu, change=caller.change)
        if not created:
            return schedule_out(record)
        shown = ScheduleCreated.model_validate(
            {**schedule_out(record), "signing_secret": record.signing_secret})
        return JSONResponse(shown.model_dump(mode="json"), status_code=201,
                            headers={"Location": f"/v1/schedules/{record.id}"})

    @router.get("/by-key/{key}", response_model=ScheduleOut,
                summary="Get the schedule with this key", responses=responses(404, 422))
    async def get_by_key(key: Key, caller: Reader) -> dict[str, Any]:
        return schedule_out(await as_code.get_by_key(ctx.schedules, caller.tenant_id, key))

    @router.delete("/by-key/{key}", status_code=204, response_class=Response,
                   responses=responses(404, 422),
                   summary="Delete the schedule with this key (as DELETE by id)")
    async def delete_by_key(key: Key, caller: Writer) -> Response:
        await as_code.delete_by_key(ctx.schedules, caller.tenant_id, key, caller.change)
        return Response(status_code=204)

    @applying.post("/apply", response_model=ApplyOut, responses=responses(409, 413, 422),
                   summary="Make the schedules with these keys (and, with prune, those of "
                   "managed_by) look like these definitions, in one transaction",
                   description="Creates the schedules whose key is new, changes those that "
                   "differ (reported field by field), and with `prune` deletes the "
                   "schedules of `managed_by` that are not listed. All or nothing: a "
                   "refused definition answers 422 naming `schedules[i].field` and its key, "
                   "and nothing is written. Applies of one tenant run one after another, so "
                   "a second apply's answer describes the changes after the first. "
                   "Unchanged schedules are not written at all. `dry_run` answers the same "
                   "and writes nothing.")
    async def apply(body: ApplyIn, caller: Writer) -> dict[str, Any]:
        definitions = [definition_of(item, index) for index, item in enumerate(body.schedules)]
        applied = await as_code.apply_schedules(
            ctx.schedules, ctx.check_url, ctx.default_limits, caller.tenant_id, definitions,
            managed_by=body.managed_by, prune=body.prune, dry_run=body.dry_run, cpu=ctx.cpu,
            change=caller.change)
        plan = applied.plan
        return {
            "created": [c.desired.key for c in plan.created],
            "updated": [{"key": u.record.spec.key, "changes": u.changes} for u in plan.updated],
            "deleted": [r.spec.key for r in plan.deleted],
            "unchanged": len(plan.unchanged), "dry_run": applied.dry_run,
            "signing_secrets": {} if applied.dry_run else {
                c.desired.key: c.signing_secret for c in plan.created},
        }

    # Both before the id routes: "/by-key/stats" must not reach "/{id}/stats".
    router.include_router(applying)
    return router
