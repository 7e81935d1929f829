"""A tenant's schedule as the API creates, edits and shows it (pure data, no I/O).

:class:`ScheduleSpec` is what the tenant controls; :class:`ScheduleRecord` adds what the
service keeps about it (ids, status, the planner's cursor, timestamps). The rules that
decide whether a spec is acceptable live in :mod:`cronwire.domain.schedule_rules`.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from cronwire.domain.alerts import AlertRules
from cronwire.domain.calendars import CalendarPolicy
from cronwire.domain.flow_control import FlowControl, effective_key
from cronwire.domain.model import (
    MisfirePolicy,
    OverlapPolicy,
    RetryPolicy,
    ScheduleStatus,
    Target,
)
from cronwire.domain.volume import DEFAULT_MAX_PENDING_RUNS

DEFAULT_CATCHUP_WINDOW_SECONDS = 3600

# Changing any of these moves the fire times, so the planner's cursor is recomputed.
TIMING_FIELDS = frozenset({"cron", "rrule", "at", "timezone", "starts_at", "ends_at",
                           "exclude_calendars", "calendar_policy"})
# Fields a PATCH may carry (pause/resume have their own routes).
EDITABLE_FIELDS = frozenset(
    {"name", "cron", "rrule", "at", "timezone", "target", "retry", "misfire_policy",
     "catchup_window_seconds", "starts_at", "ends_at", "overlap_policy", "jitter_seconds",
     "max_runs", "pause_after_failures", "alerts", "flow_control", "key", "managed_by",
     "exclude_calendars", "calendar_policy"}
)


@dataclass(frozen=True, slots=True)
class TenantLimits:
    """Per-tenant quotas; a tenant row's NULL column means the configured default."""

    max_schedules: int
    min_interval_seconds: int
    max_body_bytes: int
    max_headers: int
    # Runs not yet ended (domain.volume); the tenant's own column is applied by the store
    # that counts them, in the transaction that adds runs.
    max_pending_runs: int = DEFAULT_MAX_PENDING_RUNS

    def overridden_by(self, **columns: int | None) -> TenantLimits:
        """These defaults with every non-NULL tenant column applied."""
        chosen = {name: value for name, value in columns.items() if value is not None}
        return replace(self, **chosen)


@dataclass(frozen=True, slots=True)
class ScheduleSpec:
    name: str
    cron: str | None  # None for a one-time schedule: ``at`` instead (exactly one of them)
    target: Target
    timezone: str = "UTC"
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    misfire_policy: MisfirePolicy = MisfirePolicy.FIRE_ALL
    catchup_window_seconds: int = DEFAULT_CATCHUP_WINDOW_SECONDS
    starts_at: datetime | None = None
    ends_at: datetime | None = None
    at: datetime | None = None
    overlap_policy: OverlapPolicy = OverlapPolicy.ALLOW
    jitter_seconds: int = 0
    max_runs: int | None = None
    pause_after_failures: int | None = None
    alerts: AlertRules = field(default_factory=AlertRules)
    flow_control: FlowControl | None = None  # None: no flow control (ADR 0040)
    # An RFC 5545 rule (domain/rrules.py), given instead of cron or at (ADR 0058).
    rrule: str | None = None

    @property
    def timetable(self) -> str | None:
        """What the cron maths walks: the cron expression or the rule (stored in one
        column, told apart by rrules.is_rrule); None for a one-time schedule."""
        return self.cron if self.cron is not None else self.rrule
    # Schedules as code (ADR 0057): the tenant's unique name for it, and the tool that
    # manages it; None for a schedule made by hand.
    key: str | None = None
    managed_by: str | None = None
    # Calendars whose dates the timetable leaves out, and what an excluded occurrence
    # becomes (domain/calendars.py, ADR 0064).
    exclude_calendars: tuple[uuid.UUID, ...] = ()
    calendar_policy: CalendarPolicy = CalendarPolicy.SKIP

    def with_changes(self, changes: dict[str, Any]) -> ScheduleSpec:
        """A copy with the PATCHed fields replaced (unknown names raise KeyError)."""
        unknown = set(changes) - EDITABLE_FIELDS
        if unknown:
            raise KeyError(", ".join(sorted(unknown)))
        return replace(self, **changes)

    def timing_differs(self, other: ScheduleSpec) -> bool:
        return any(getattr(self, name) != getattr(other, name) for name in TIMING_FIELDS)

    @property
    def flow_key(self) -> str | None:
        """The flow-control key the schedule's runs count under; None without flow control."""
        if self.flow_control is None:
            return None
        return effective_key(self.flow_control, self.target.url)


@dataclass(frozen=True, slots=True)
class ScheduleRecord:
    id: uuid.UUID
    tenant_id: uuid.UUID
    spec: ScheduleSpec
    status: ScheduleStatus
    next_fire_at: datetime | None
    last_fire_at: datetime | None
    created_at: datetime
    updated_at: datetime
    previous_secret_expires_at: datetime | None
    # Shown to the tenant only when it is created or rotated.
    signing_secret: str = field(repr=False)
    runs_planned: int = 0  # scheduled occurrences written (max_runs counts these)
    consecutive_failures: int = 0
    paused_reason: str | None = None  # the pause note, or why it paused itself
    paused_at: datetime | None = None
    version: int = 1  # 1 on create, +1 per change a person makes (ETag, If-Match)
