"""What the tenant routers need, handed over by the container (or a test) in one object."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from cronwire.api.auth import Provide
from cronwire.domain.schedules import TenantLimits
from cronwire.ports import RunHistory, ScheduleStore, TokenVerifier

# Create-time address policy (TargetGuard.check_url): raises InvalidTarget/TargetRefused.
UrlCheck = Callable[[str], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class ApiContext:
    tokens: Provide[TokenVerifier]
    schedules: Provide[ScheduleStore]
    runs: Provide[RunHistory]
    check_url: UrlCheck
    default_limits: TenantLimits
    max_request_bytes: int = 262_144  # SCHEDULER_API_MAX_REQUEST_BYTES
    secret_overlap_seconds: int = 24 * 3600
