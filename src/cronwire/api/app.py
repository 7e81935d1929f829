"""The FastAPI application: operations routes always, tenant routes with the api role."""

from __future__ import annotations

from collections.abc import Callable

from fastapi import APIRouter, FastAPI

from cronwire.api.ops import ReadinessCheck, ops_router


def create_app(
    readiness: ReadinessCheck,
    exposition: Callable[[], bytes],
    tenant_routers: list[APIRouter] | None = None,
) -> FastAPI:
    app = FastAPI(
        title="cronwire",
        version="0.1.0",
        description="Multi-tenant durable cron: schedules, runs and their delivery evidence.",
    )
    app.include_router(ops_router(readiness, exposition))
    for router in tenant_routers or []:
        app.include_router(router)
    return app
