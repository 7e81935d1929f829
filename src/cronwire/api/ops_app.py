"""The operations endpoints alone, as a bare ASGI application: what a replica without the
``api`` role serves (``/healthz``, ``/readyz``, ``/metrics``).

FastAPI and pydantic's models were about half of such a replica's start-up CPU, and it
serves no route that needs them (docs/operating.md#start-up). Each of these answers is
the one the API's FastAPI application gives to the same request, errors included
(tests/unit/test_ops_app.py asks both); ``ops.py`` serves the same three routes there,
through :func:`readiness_answer`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST

from cronwire.api.error_shape import error_body, request_id_from

log = logging.getLogger(__name__)

ReadinessCheck = Callable[[], Awaitable[dict[str, bool]]]
Exposition = Callable[[], bytes]
Send = Callable[[dict[str, Any]], Awaitable[None]]
_JSON = b"application/json"


def readiness_answer(checks: dict[str, bool]) -> tuple[int, dict[str, Any]]:
    """``/readyz``'s status and body: 503 naming the failing checks, else 200."""
    failing = [name for name, ok in checks.items() if not ok]
    body = {"status": "not ready" if failing else "ready", "checks": checks,
            "failing": failing}
    return (503 if failing else 200), body


def _json(value: object) -> bytes:
    # As starlette's JSONResponse renders it, so both applications answer byte for byte.
    return json.dumps(value, ensure_ascii=False, allow_nan=False, indent=None,
                      separators=(",", ":")).encode("utf-8")


class OpsApp:
    """``GET /healthz``, ``GET /readyz`` and ``GET /metrics``; any other path is a 404
    and any other method a 405 (``Allow: GET``), in the one error shape."""

    def __init__(self, readiness: ReadinessCheck, exposition: Exposition) -> None:
        self._routes: dict[str, Callable[[], Awaitable[tuple[int, bytes, bytes]]]] = {
            "/healthz": self._healthz, "/readyz": self._readyz, "/metrics": self._metrics,
        }
        self._readiness = readiness
        self._exposition = exposition

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Send) -> None:
        if scope["type"] == "websocket":  # no route takes one: refused, as FastAPI does
            await send({"type": "websocket.close", "code": 1000})
            return
        if scope["type"] != "http":
            return
        route = self._routes.get(scope["path"])
        extra: list[tuple[bytes, bytes]] = []
        if route is None:
            status, content_type, body = 404, _JSON, _json(error_body(404, "Not Found"))
        elif scope["method"] != "GET":
            status, content_type, body = 405, _JSON, _json(error_body(405, "Method Not Allowed"))
            extra.append((b"allow", b"GET"))
        else:
            try:
                status, content_type, body = await route()
            except Exception as exc:  # a JSON 500 under a request id, never a dropped connection
                status, content_type, body, rid = 500, _JSON, *self._unexpected(scope, exc)
                extra.append((b"x-request-id", rid.encode()))
        await send({"type": "http.response.start", "status": status, "headers": [
            (b"content-length", str(len(body)).encode()), (b"content-type", content_type),
            *extra]})
        await send({"type": "http.response.body", "body": body})

    async def _healthz(self) -> tuple[int, bytes, bytes]:
        return 200, _JSON, _json({"status": "ok"})

    async def _readyz(self) -> tuple[int, bytes, bytes]:
        status, body = readiness_answer(await self._readiness())
        return status, _JSON, _json(body)

    async def _metrics(self) -> tuple[int, bytes, bytes]:
        return 200, CONTENT_TYPE_LATEST.encode(), self._exposition()

    @staticmethod
    def _unexpected(scope: dict[str, Any], exc: Exception) -> tuple[bytes, str]:
        given = dict(scope.get("headers") or []).get(b"x-request-id", b"")
        request_id = request_id_from(given.decode("latin-1"))
        log.error("unexpected error answering %s %s (request id %s)", scope["method"],
                  scope["path"], request_id, exc_info=exc)
        message = f"internal error; the replica's log has it under request id {request_id}"
        return _json(error_body(500, message, request_id=request_id)), request_id
