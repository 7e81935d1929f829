"""`/v1/runs`: the tenant's run history, newest first, and one run with its evidence."""

# No "from __future__ import annotations": FastAPI must see the real types of the
# handlers' parameters, and the Tenant dependency alias is local to the factory.
import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query

from cronwire.api.auth import request_authenticator, resolve, tenant_dependency
from cronwire.api.context import ApiContext
from cronwire.api.errors import responses
from cronwire.api.limits import capped_route
from cronwire.api.schemas import Instant, RunDetailOut, RunPage, RunStatusName
from cronwire.domain.history import MAX_PAGE, RunQuery, RunView
from cronwire.domain.keyset import decode_run_cursor, encode_run_cursor
from cronwire.domain.model import RunStatus
from cronwire.domain.schedule_rules import RuleViolation


def run_out(run: RunView) -> dict[str, Any]:
    return {
        "id": run.id, "schedule_id": run.schedule_id, "scheduled_for": run.scheduled_for,
        "status": run.status.value, "attempt_count": run.attempt_count,
        "fire_after": run.fire_after, "first_attempt_at": run.first_attempt_at,
        "finished_at": run.finished_at, "last_status_code": run.last_status_code,
        "last_error": run.last_error, "trigger": run.trigger.value,
    }


def runs_router(ctx: ApiContext) -> APIRouter:
    router = APIRouter(prefix="/v1/runs", tags=["runs"],
                       route_class=capped_route(ctx.max_request_bytes,
                                               request_authenticator(ctx.tokens)))
    Tenant = Annotated[uuid.UUID, Depends(tenant_dependency(ctx.tokens))]

    @router.get("", response_model=RunPage, responses=responses(422),
                summary="Run history, newest scheduled_for first (keyset pages)")
    async def list_runs(
        tenant: Tenant,
        schedule_id: uuid.UUID | None = None,
        status: RunStatusName | None = None,
        since: Annotated[Instant | None,
                         Query(description="Inclusive lower bound on scheduled_for.")] = None,
        until: Annotated[Instant | None,
                         Query(description="Exclusive upper bound on scheduled_for.")] = None,
        limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 50,
        cursor: Annotated[str | None, Query(max_length=200)] = None,
    ) -> dict[str, Any]:
        if since is not None and until is not None and not since < until:
            raise RuleViolation("until", "must be later than since")
        query = RunQuery(
            limit=limit + 1, schedule_id=schedule_id,
            status=RunStatus(status) if status else None, since=since, until=until,
            before=decode_run_cursor(cursor) if cursor else None,
        )
        found = await (await resolve(ctx.runs)).list(tenant, query)
        page = found[:limit]
        more = len(found) > limit
        return {"items": [run_out(run) for run in page],
                "next_cursor": encode_run_cursor(page[-1].key) if more else None}

    @router.get("/{id}", response_model=RunDetailOut, responses=responses(404, 422),
                summary="One run with its delivery attempts")
    async def get_run(
        run_id: Annotated[uuid.UUID, Path(alias="id", description="The run's id.")],
        tenant: Tenant,
    ) -> dict[str, Any]:
        detail = await (await resolve(ctx.runs)).get(tenant, run_id)
        attempts = [
            {"attempt": a.attempt, "started_at": a.started_at, "finished_at": a.finished_at,
             "outcome": a.outcome, "status_code": a.status_code, "error": a.error,
             "duration_ms": a.duration_ms, "response_excerpt": a.response_excerpt}
            for a in detail.attempts
        ]
        return {**run_out(detail.run), "attempts": attempts}

    return router
