"""Limits of the tenant API: the request-body cap and the per-tenant defaults.

The body cap (``SCHEDULER_API_MAX_REQUEST_BYTES``) is enforced by the tenant routers'
route class, around FastAPI's own handler, so it runs before anything reads or parses the
body: a declared ``Content-Length`` over the cap is refused without reading a byte, and a
chunked body is counted as it streams in and refused the moment it passes the cap. The
server therefore never buffers or parses more than the cap. Both answer 413 in the API's
error shape (FastAPI's built-in ``max_body_size`` answers plain text for the first case).

The per-tenant limits are columns of ``tenant``; NULL means the configured default, which
the container hands over in ``ApiContext.default_limits``. The domain rules
(:mod:`cronwire.domain.schedule_rules`) enforce them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any

from fastapi import HTTPException, Request, Response
from fastapi.dependencies.models import Dependant
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import Message, Receive

from cronwire.api.errors import error_response


def _too_large(cap: int) -> str:
    return f"body: request body exceeds {cap} bytes"


def _counting(receive: Receive, cap: int) -> Receive:
    seen = 0

    async def counted() -> Message:
        nonlocal seen
        message = await receive()
        if message["type"] == "http.request":
            seen += len(message.get("body", b""))
            if seen > cap:
                # FastAPI re-raises an HTTPException from reading the body untouched; the
                # app's handler renders it in the error shape.
                raise HTTPException(413, _too_large(cap))
        return message

    return counted


def declared_scopes(dependant: Dependant) -> list[str]:
    """Every scope a route's dependencies declare (``Security(..., scopes=[...])``)."""
    found = list(dependant.own_oauth_scopes or [])
    for sub in dependant.dependencies:
        found.extend(declared_scopes(sub))
    return found


def capped_route(
    cap: int, authenticate: Callable[[Request, Sequence[str]], Awaitable[object]] | None = None
) -> type[APIRoute]:
    """An APIRoute class whose handlers refuse bodies over ``cap`` bytes with 413.

    FastAPI decodes a JSON body before it runs any dependency, so a malformed body would
    answer 422 ahead of authentication; with ``authenticate``, a request that fails
    validation is authenticated first, and a missing or unknown token answers 401 (a
    token without the route's scope 403).
    """

    class CappedRoute(APIRoute):
        def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
            handler = super().get_route_handler()

            async def capped(request: Request) -> Response:
                declared = request.headers.get("content-length", "")
                if declared.isdigit() and int(declared) > cap:
                    return error_response(413, _too_large(cap), field="body")
                try:
                    return await handler(
                        Request(request.scope, _counting(request.receive, cap)))
                except (RequestValidationError, StarletteHTTPException) as exc:
                    undecodable = (isinstance(exc, StarletteHTTPException)
                                   and exc.status_code == 400)
                    invalid = undecodable or isinstance(exc, RequestValidationError)
                    if invalid and authenticate is not None:
                        await authenticate(request, declared_scopes(self.dependant))
                    raise

            return capped

    return CappedRoute
