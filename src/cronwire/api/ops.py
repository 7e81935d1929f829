"""Operations routes (no auth): liveness, readiness and Prometheus metrics, in the API's
FastAPI application (a replica without the api role serves them from ops_app.py)."""

from __future__ import annotations

from collections.abc import Callable

from fastapi import APIRouter, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST

from cronwire.api.ops_app import ReadinessCheck, readiness_answer


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
        status, body = readiness_answer(await readiness())
        return JSONResponse(body, status_code=status)

    @router.get("/metrics", summary="Prometheus metrics", response_class=Response)
    async def metrics() -> Response:
        return Response(exposition(), media_type=CONTENT_TYPE_LATEST)

    return router
