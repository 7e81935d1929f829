"""One error shape for every refusal: ``{"error": {"code", "message", "field", "limit"}}``.

``message`` starts with the field or limit it is about (``"target.url: scheme must be
http or https"``), so a tenant can act on it without reading the docs. Domain and storage
exceptions are mapped to status codes here and nowhere else.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException as StarletteHTTPException

from cronwire.api.error_shape import error_body, request_id_from
from cronwire.domain.errors import (
    DomainError,
    LimitExceeded,
    NotFound,
    RuleViolation,
    StateConflict,
    StorageError,
    VersionMismatch,
)
from cronwire.domain.schedule_rules import field_of
from cronwire.domain.secrets import SecretError

log = logging.getLogger(__name__)

# Limits a tenant hits by how many objects it has (quota) answer 429; limits on the
# content of one request answer 422 like any other invalid field.
QUOTA_LIMITS = frozenset({"max_schedules", "max_pending_runs", "max_tokens", "max_calendars"})


class ErrorDetail(BaseModel):  # the shape error_shape.error_body builds, for the docs
    code: str = Field(examples=["invalid_request"])
    message: str = Field(examples=["retry.max_attempts: must be between 1 and 8"])
    field: str | None = Field(None, description="The request field at fault, dotted.",
                              examples=["retry.max_attempts"])
    limit: str | None = Field(None, description="The per-tenant limit that was hit.",
                              examples=["max_schedules"])
    request_id: str | None = Field(None, description="On an unexpected error (500): the id "
                                   "the replica's log line carries.")


class ErrorBody(BaseModel):
    error: ErrorDetail


class ApiError(Exception):
    def __init__(self, status: int, message: str, *, field: str | None = None,
                 limit: str | None = None, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.field, self.limit = status, message, field, limit
        self.headers = headers


def error_response(status: int, message: str, *, field: str | None = None,
                   limit: str | None = None, headers: dict[str, str] | None = None,
                   code: str | None = None, request_id: str | None = None) -> JSONResponse:
    return JSONResponse(error_body(status, message, field=field, limit=limit, code=code,
                                   request_id=request_id),
                        status_code=status, headers=headers)


def _described(description: str) -> dict[str, Any]:
    return {"model": ErrorBody, "description": description}


ERROR_DOCS: dict[int, dict[str, Any]] = {
    401: _described("Missing, unknown, revoked or expired bearer token."),
    403: _described("The token's scope does not cover this operation; the message names "
                    "the scope it needs (read < write < admin)."),
    404: _described("No such object for this tenant (another tenant's object included)."),
    409: _described("The object's state does not allow this (the message says why)."),
    412: _described("`If-Match` names a version that is no longer current; the `ETag` "
                    "header and the message give the current one."),
    413: _described("Request body larger than the server's cap; refused before parsing."),
    422: _described("Invalid input; `field` names what to fix, `limit` a per-tenant limit."),
    429: _described("A per-tenant quota (max_schedules, max_pending_runs) is used up, or "
                    "the API rate limit (api_rate_per_second) is passed: `limit` names it "
                    "(and `Retry-After` says when to call again after a rate refusal)."),
    503: _described("The database is unreachable; retry after `Retry-After` seconds."),
}


def responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` entries for the given error statuses (always 401, 403, 429 (the
    API rate limit applies to every tenant route) and 503)."""
    return {status: ERROR_DOCS[status] for status in sorted({401, 403, 429, 503, *statuses})}


def _printable(part: object) -> str:
    """A location part as text that survives JSON encoding: a header name holding a lone
    surrogate is shown escaped (a bare surrogate cannot be encoded as UTF-8)."""
    return str(part).encode("utf-8", "backslashreplace").decode("utf-8")


# List fields whose items a refusal names by index (an apply's `schedules[3].cron`).
INDEXED_LISTS = frozenset({"schedules"})


def _dotted(loc: tuple[Any, ...]) -> str:
    parts: list[str] = []
    for part in loc:
        if isinstance(part, int):
            if parts and parts[-1] in INDEXED_LISTS:
                parts[-1] = f"{parts[-1]}[{part}]"
        elif part != "[key]":
            parts.append(_printable(part))
    if parts and parts[0] in {"body", "query", "path", "header"}:
        parts = parts[1:] or parts[:1]
    return ".".join(parts) or "body"


def _item_key(loc: tuple[Any, ...], body: Any) -> str | None:
    """The ``key`` of the apply definition a refusal is about, to name it in the message."""
    if len(loc) > 2 and loc[:2] == ("body", "schedules") and isinstance(loc[2], int):
        items = body.get("schedules") if isinstance(body, dict) else None
        if isinstance(items, list) and 0 <= loc[2] < len(items) and isinstance(items[loc[2]], dict):
            key = items[loc[2]].get("key")
            return key if isinstance(key, str) else None
    return None


async def _validation(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    first = exc.errors()[0] if exc.errors() else {"loc": ("body",), "msg": "invalid"}
    loc = tuple(first.get("loc", ("body",)))
    field = _dotted(loc)
    if first.get("type") == "json_invalid":
        field = "body"
    # pydantic prefixes the message of a ValueError raised by a validator; ours are written
    # to follow "<field>: " directly.
    message = _printable(first.get("msg", "invalid")).removeprefix("Value error, ")
    key = _item_key(loc, exc.body)
    if key is not None:
        message = f"(key {_printable(repr(key))}) {message}"
    return error_response(422, f"{field}: {message}", field=field)


async def _http(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    if exc.status_code == 400:
        # FastAPI's answer to a body it cannot decode (not UTF-8, broken framing): an
        # input error like any other, so a 422 naming the body.
        return error_response(422, f"body: cannot be decoded as JSON ({exc.detail})",
                              field="body")
    return error_response(exc.status_code, str(exc.detail),
                          field="body" if exc.status_code == 413 else None,
                          headers=dict(exc.headers) if exc.headers else None)


async def _api(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ApiError)
    return error_response(exc.status, exc.message, field=exc.field, limit=exc.limit,
                          headers=exc.headers)


async def _domain(_: Request, exc: Exception) -> JSONResponse:
    if isinstance(exc, LimitExceeded):
        status = 429 if exc.limit in QUOTA_LIMITS else 422
        return error_response(status, str(exc), field=exc.field, limit=exc.limit,
                              code="limit_exceeded")
    field = exc.field if isinstance(exc, RuleViolation) else field_of(
        exc if isinstance(exc, DomainError) else DomainError(str(exc)), "body")
    message = str(exc) if str(exc).startswith(f"{field}: ") else f"{field}: {exc}"
    return error_response(422, message, field=field)


async def _not_found(_: Request, exc: Exception) -> JSONResponse:
    return error_response(404, str(exc))


async def _conflict(_: Request, exc: Exception) -> JSONResponse:
    return error_response(409, str(exc))


async def _stale(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, VersionMismatch)
    return error_response(412, str(exc), field="If-Match",
                          headers={"ETag": f'"{exc.current}"'})


async def _storage(_: Request, exc: Exception) -> JSONResponse:
    log.warning("storage failure answered 503: %s", exc)
    return error_response(503, "the database is unavailable; retry shortly",
                          headers={"Retry-After": "1"})


async def _sealed(_: Request, exc: Exception) -> JSONResponse:
    # A stored secret that does not open: the key ring or the row changed under us. The
    # operator's problem, not the caller's: said in the log, answered like an outage.
    log.error("a sealed secret did not open: %s", exc)
    return error_response(503, "a stored secret of this object cannot be opened with the "
                          "configured key ring; the operator has been told",
                          headers={"Retry-After": "60"})


def request_id_of(request: Request) -> str:
    """The caller's X-Request-ID when it is a plain token, else a new one."""
    return request_id_from(request.headers.get("x-request-id", ""))


async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    """Anything no handler above foresaw: a JSON 500 (never a bare text page or a dropped
    connection), logged whole under a request id the answer repeats."""
    request_id = request_id_of(request)
    log.error("unexpected error answering %s %s (request id %s)", request.method,
              request.url.path, request_id, exc_info=exc)
    return error_response(500, f"internal error; the replica's log has it under request id "
                          f"{request_id}", request_id=request_id,
                          headers={"X-Request-ID": request_id})


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(RequestValidationError, _validation)
    app.add_exception_handler(StarletteHTTPException, _http)
    app.add_exception_handler(ApiError, _api)
    app.add_exception_handler(DomainError, _domain)
    app.add_exception_handler(NotFound, _not_found)
    app.add_exception_handler(VersionMismatch, _stale)
    app.add_exception_handler(StateConflict, _conflict)
    app.add_exception_handler(StorageError, _storage)
    app.add_exception_handler(SecretError, _sealed)
    app.add_exception_handler(Exception, _unexpected)
