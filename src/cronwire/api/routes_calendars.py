"""`/v1/calendars`: a tenant's holiday and business-day calendars (ADR 0064). read for
GETs, write for the rest, as for schedules."""

# No "from __future__ import annotations": FastAPI must see the real types of the
# handlers' parameters, and the caller aliases are local to the factory.
import uuid
from dataclasses import replace
from typing import Annotated, Any

from fastapi import APIRouter, Path, Response, Security

from cronwire.api.auth import Caller, caller_dependency, request_authenticator
from cronwire.api.context import ApiContext
from cronwire.api.errors import responses
from cronwire.api.limits import capped_route
from cronwire.api.schemas_calendars import (
    CalendarIn,
    CalendarList,
    CalendarOut,
    CalendarPatch,
    CalendarUpdated,
    HolidaysIn,
)
from cronwire.domain.access import Scope
from cronwire.domain.calendar_specs import CalendarRecord, CalendarSpec, HolidaySource
from cronwire.domain.errors import RuleViolation
from cronwire.service import calendar_commands as commands

CalendarId = Annotated[uuid.UUID, Path(alias="id", description="The calendar's id.")]


def calendar_out(record: CalendarRecord) -> dict[str, Any]:
    spec = record.spec
    return {"id": record.id, "name": spec.name, "dates": list(spec.dates),
            "holidays": spec.holidays.to_document() if spec.holidays else None,
            "created_at": record.created_at, "updated_at": record.updated_at}


def _source(given: HolidaysIn) -> HolidaySource:
    return HolidaySource(given.country, tuple(given.years), given.subdivision)


def spec_from(body: CalendarIn) -> CalendarSpec:
    if (body.dates is None) == (body.holidays is None):
        raise RuleViolation("dates", "give exactly one of dates and holidays")
    if body.holidays is not None:
        return CalendarSpec(body.name, holidays=_source(body.holidays))
    return CalendarSpec(body.name, tuple(body.dates or ()))


def patched(spec: CalendarSpec, body: CalendarPatch) -> CalendarSpec:
    sent = body.model_fields_set
    if "dates" in sent and "holidays" in sent:
        raise RuleViolation("dates", "give at most one of dates and holidays")
    for name in ("name", "dates", "holidays"):
        if name in sent and getattr(body, name) is None:
            raise RuleViolation(name, "must not be null")
    if body.name is not None:
        spec = replace(spec, name=body.name)
    if body.dates is not None:
        spec = replace(spec, dates=tuple(body.dates), holidays=None)
    if body.holidays is not None:
        spec = replace(spec, holidays=_source(body.holidays))
    return spec


def calendars_router(ctx: ApiContext) -> APIRouter:
    assert ctx.calendars is not None
    store = ctx.calendars
    router = APIRouter(prefix="/v1/calendars", tags=["calendars"],
                       route_class=capped_route(ctx.max_request_bytes,
                                               request_authenticator(ctx.tokens)))
    authenticated = caller_dependency(ctx.tokens, ctx.rate_limit)
    Reader = Annotated[Caller, Security(authenticated, scopes=[Scope.READ])]
    Writer = Annotated[Caller, Security(authenticated, scopes=[Scope.WRITE])]

    @router.post("", status_code=201, response_model=CalendarOut,
                 responses=responses(409, 413, 422),
                 summary="Create a calendar from dates or from a country's holidays")
    async def create(body: CalendarIn, caller: Writer, response: Response) -> dict[str, Any]:
        record = await commands.create_calendar(store, caller.tenant_id, spec_from(body),
                                                cpu=ctx.cpu, change=caller.change)
        response.headers["Location"] = f"/v1/calendars/{record.id}"
        return calendar_out(record)

    @router.get("", response_model=CalendarList, responses=responses(),
                summary="The tenant's calendars, by name")
    async def list_calendars(caller: Reader) -> dict[str, Any]:
        found = await commands.list_calendars(store, caller.tenant_id)
        return {"items": [calendar_out(r) for r in found]}

    @router.get("/{id}", response_model=CalendarOut, responses=responses(404, 422),
                summary="Get a calendar")
    async def get(calendar_id: CalendarId, caller: Reader) -> dict[str, Any]:
        return calendar_out(await commands.get_calendar(store, caller.tenant_id, calendar_id))

    @router.patch("/{id}", response_model=CalendarUpdated,
                  responses=responses(404, 409, 413, 422),
                  summary="Edit a calendar; the schedules that exclude it are re-planned",
                  description="New dates (or a new holidays source) take back the runs "
                  "not yet due that the schedules excluding it planned on the old dates, and "
                  "plan them again on the new ones.")
    async def patch(calendar_id: CalendarId, body: CalendarPatch,
                    caller: Writer) -> dict[str, Any]:
        record, replanned = await commands.update_calendar(
            store, caller.tenant_id, calendar_id, lambda spec: patched(spec, body),
            cpu=ctx.cpu, change=caller.change)
        return {**calendar_out(record), "replanned_schedules": replanned}

    @router.delete("/{id}", status_code=204, response_class=Response,
                   responses=responses(404, 409, 422),
                   summary="Delete a calendar no live schedule excludes (409 names them)")
    async def delete(calendar_id: CalendarId, caller: Writer) -> Response:
        await commands.delete_calendar(store, caller.tenant_id, calendar_id,
                                       change=caller.change)
        return Response(status_code=204)

    return router
