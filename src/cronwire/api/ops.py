"""Operations routes (no auth): liveness, readiness and Prometheus metrics."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from fastapi import APIRouter, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST

ReadinessCheck = Callable[[], Awaitable[dict[str, bool]]]


def ops_router(readiness: ReadinessCheck, exposition: Callable[[], bytes]) -> APIRouter:
    router = APIRouter(tags=["operations"])

    @router.get("/healthz", summary="The process is alive")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @router.get(
        "/readyz",
        summary="Database reachable, migrations current, loops running",
        responses={503: {"description": "Not ready; the body names the failing checks"}},
    )
    async def readyz() -> JSONResponse:
        checks = await readiness()
        ready = all(checks.values())
        failing = [name for name, ok in checks.items() if not ok]
        return JSONResponse(
            {"status": "ready" if ready else "not ready", "checks": checks, "failing": failing},
            status_code=200 if ready else 503,
        )

    @router.get("/metrics", summary="Prometheus metrics", response_class=Response)
    async def metrics() -> Response:
        return Response(exposition(), media_type=CONTENT_TYPE_LATEST)

    return router
