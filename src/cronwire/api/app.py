"""The FastAPI application: operations routes always, tenant routes with the api role."""

from __future__ import annotations

from collections.abc import Callable

from fastapi import APIRouter, FastAPI

from cronwire.api.context import ApiContext
from cronwire.api.docs import docs_router
from cronwire.api.errors import install_error_handlers
from cronwire.api.ops import ops_router
from cronwire.api.ops_app import ReadinessCheck

DESCRIPTION = """\
Multi-tenant durable cron: schedules, runs and their delivery evidence.

Every `/v1` route takes `Authorization: Bearer <token>` (from `cronwire tenant create` or
`POST /v1/tokens`). A token's scope is `read` (every GET), `write` (read plus every change
to schedules and runs) or `admin` (write plus tokens, the alert destination and the audit
log); each operation's security requirement names the scope it needs, a token without it
answers 403 naming it, and an expired token 401.
A token sees only its tenant's objects: another tenant's id answers 404, exactly like an
id that does not exist. Every error has one shape,
`{"error": {"code", "message", "field", "limit"}}`, and its message starts with the
field or limit at fault. Times are RFC 3339 in UTC (`...Z`).
"""
OPENAPI_TAGS = [
    {"name": "schedules", "description": "Cron schedules and their HTTP targets."},
    {"name": "runs", "description": "Run history (newest first) with attempt evidence."},
    {"name": "calendars", "description": "Holiday and business-day calendars schedules "
                                          "exclude (exclude_calendars, calendar_policy)."},
    {"name": "alerts", "description": "Where alert events go, and the events themselves."},
    {"name": "flow control", "description": "Per-key concurrency, rate and Retry-After "
                                            "holds, shared by every replica."},
    {"name": "tokens", "description": "The tenant's own API tokens and their scopes "
                                       "(admin)."},
    {"name": "audit", "description": "Who changed what: one entry per change (admin)."},
    {"name": "operations", "description": "Health, readiness and metrics (no auth)."},
]


def build_tenant_routers(ctx: ApiContext) -> list[APIRouter]:
    """The `/v1` routers, wired to the stores in ``ctx``, and the console over them.

    Imported here, not at the top: their request and answer models are about a third of
    a replica's start-up CPU, and a replica without the api role never needs them."""
    from cronwire.api.console import console_router
    from cronwire.api.routes_access import audit_router, tokens_router
    from cronwire.api.routes_alerts import alerts_router
    from cronwire.api.routes_calendars import calendars_router
    from cronwire.api.routes_flow import flow_router
    from cronwire.api.routes_insight import insight_router
    from cronwire.api.routes_runs import runs_router
    from cronwire.api.routes_schedules import schedules_router
    from cronwire.api.routes_schedules_as_code import as_code_router

    # as_code_router first: its "/by-key/{key}" routes must not be taken for "/{id}/...".
    routers = [as_code_router(ctx), schedules_router(ctx), runs_router(ctx), tokens_router(ctx)]
    if ctx.stats is not None:
        routers.append(insight_router(ctx))
    if ctx.alerts is not None:
        routers.append(alerts_router(ctx))
    if ctx.flows is not None:
        routers.append(flow_router(ctx))
    if ctx.audit is not None:
        routers.append(audit_router(ctx))
    if ctx.calendars is not None:
        routers.append(calendars_router(ctx))
    return [*routers, console_router()]


def create_app(
    readiness: ReadinessCheck,
    exposition: Callable[[], bytes],
    tenant_routers: list[APIRouter] | None = None,
) -> FastAPI:
    app = FastAPI(
        title="cronwire",
        version="0.1.0",
        description=DESCRIPTION,
        openapi_tags=OPENAPI_TAGS,
        # FastAPI's own /docs and /redoc load from a CDN; ours serve packaged files.
        docs_url=None,
        redoc_url=None,
    )
    install_error_handlers(app)
    app.include_router(docs_router(app))
    app.include_router(ops_router(readiness, exposition))
    for router in tenant_routers or []:
        app.include_router(router)
    return app
