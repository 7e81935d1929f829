"""Limits of the tenant API: the request-body cap and the per-tenant defaults.

The body cap (``SCHEDULER_API_MAX_REQUEST_BYTES``) is FastAPI's per-router
``max_body_size`` (Starlette's RequestBodyLimitMiddleware): a declared
``Content-Length`` over the cap is refused before a byte is read, and a chunked body is
counted as it streams in and refused the moment it passes the cap, so the server never
buffers or parses more than the cap. The 413 reaches the client in the API's error shape.

The per-tenant limits are columns of ``tenant``; NULL means the configured default built
here. The domain rules (:mod:`cronwire.domain.schedule_rules`) enforce them.
"""

from __future__ import annotations

from cronwire.config import Settings
from cronwire.domain.schedules import TenantLimits


def default_limits(settings: Settings) -> TenantLimits:
    """The limits of a tenant whose own limit columns are NULL."""
    return TenantLimits(
        max_schedules=settings.tenant_max_schedules,
        min_interval_seconds=settings.tenant_min_interval_seconds,
        max_body_bytes=settings.tenant_max_body_bytes,
        max_headers=settings.tenant_max_headers,
    )
