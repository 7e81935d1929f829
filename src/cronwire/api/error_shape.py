"""The one error shape every HTTP answer of a replica uses, as plain data.

``errors.py`` answers the API's errors with it (its pydantic models only describe the shape
in the OpenAPI document); ``ops_app.py`` answers with it where FastAPI is not imported."""

from __future__ import annotations

import re
import uuid
from typing import Any

ERROR_CODES = {400: "bad_request", 401: "unauthorized", 403: "forbidden", 404: "not_found",
               405: "method_not_allowed", 409: "conflict", 413: "payload_too_large",
               412: "precondition_failed", 415: "unsupported_media_type",
               422: "invalid_request", 429: "limit_exceeded", 500: "internal_error",
               503: "unavailable"}
# A caller's own X-Request-ID is echoed when it is a plain token; anything else is replaced.
_REQUEST_ID = re.compile(r"[A-Za-z0-9._-]{1,64}")


def error_body(status: int, message: str, *, field: str | None = None,
               limit: str | None = None, code: str | None = None,
               request_id: str | None = None) -> dict[str, Any]:
    """``{"error": {code, message, field, limit}}``, plus ``request_id`` only where there
    is one (a 500): every other error keeps its four members."""
    detail: dict[str, Any] = {"code": code or ERROR_CODES.get(status, "error"),
                              "message": message, "field": field, "limit": limit}
    if request_id is not None:
        detail["request_id"] = request_id
    return {"error": detail}


def request_id_from(given: str) -> str:
    """The caller's X-Request-ID when it is a plain token, else a new one."""
    return given if _REQUEST_ID.fullmatch(given) else uuid.uuid4().hex
