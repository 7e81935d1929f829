"""`/v1/schedules/{id}/stats` and `/explain`: what a schedule did, and why."""

# No "from __future__ import annotations": FastAPI must see the real types of the
# handlers' parameters, and the Tenant dependency alias is local to the factory.
import dataclasses
import uuid
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path, Query, Security

from cronwire.api.auth import Caller, caller_dependency, request_authenticator
from cronwire.api.context import ApiContext
from cronwire.api.errors import responses
from cronwire.api.limits import capped_route
from cronwire.api.mapping import run_out
from cronwire.api.schemas_common import WrittenInstant
from cronwire.api.schemas_observability import ExplanationOut, ScheduleStatsOut
from cronwire.domain.access import Scope
from cronwire.service import insight

ScheduleId = Annotated[uuid.UUID, Path(alias="id", description="The schedule's id.")]
Window = Literal["1h", "24h", "7d", "30d"]


def insight_router(ctx: ApiContext) -> APIRouter:
    router = APIRouter(prefix="/v1/schedules", tags=["schedules"],
                       route_class=capped_route(ctx.max_request_bytes,
                                               request_authenticator(ctx.tokens)))
    authenticated = caller_dependency(ctx.tokens, ctx.rate_limit)
    # Each handler's caller parameter declares the scope it needs (CONTRACT: read every
    # GET; write every change to schedules and runs; admin tokens, alerts, audit).
    Reader = Annotated[Caller, Security(authenticated, scopes=[Scope.READ])]

    @router.get("/{id}/stats", response_model=ScheduleStatsOut, responses=responses(404, 422),
                summary="Counts, success rate, fire lag and durations over a window")
    async def stats(schedule_id: ScheduleId, caller: Reader,
                    window: Annotated[Window, Query()] = "24h") -> dict[str, Any]:
        assert ctx.stats is not None
        found = await insight.schedule_stats(ctx.schedules, ctx.stats, caller.tenant_id,
                                             schedule_id, window, ctx.metrics)
        return {**dataclasses.asdict(found), "success_rate": found.success_rate}

    @router.get("/{id}/explain", response_model=ExplanationOut, responses=responses(404, 422),
                summary="What happened (or will happen) to the occurrence at or after an "
                "instant, and why")
    async def explain(
        schedule_id: ScheduleId, caller: Reader,
        at: Annotated[WrittenInstant, Query(
            description="RFC 3339 instant; the first occurrence at or after it is explained. "
            "A wall time the schedule's zone skipped (02:30+01:00 on a spring-forward night) "
            "asks about that wall time, which DST moved.")],
    ) -> dict[str, Any]:
        assert ctx.stats is not None
        found = await insight.explain_instant(ctx.schedules, ctx.runs, ctx.stats, caller.tenant_id,
                                              schedule_id, at, ctx.cpu, ctx.calendars)
        return {"occurrence": found.occurrence, "verdict": found.verdict,
                "reason": found.reason,
                "run": run_out(found.run) if found.run is not None else None,
                "previous_occurrence": found.previous_occurrence,
                "next_occurrence": found.next_occurrence}

    return router
