"""Alerts (ADR 0036): a schedule's rules, a tenant's destination, and the events (pure).

Transitions are decided in Postgres (ADR 0036): the terminal write decides failing,
recovered and slow; the periodic check decides late. What lives here is what a tenant
may set, and the exact body each event is delivered with.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from cronwire.domain.delivery import rfc3339_utc
from cronwire.domain.errors import RuleViolation
from cronwire.domain.model import RetryPolicy

EVENT_TYPES = ("schedule.failing", "schedule.recovered", "schedule.late", "schedule.slow",
               "schedule.paused")
# (field, low, high) of each rule: the CHECKs of migration 0011.
RULE_BOUNDS = {"after_failures": (1, 1000), "late_after_seconds": (1, 30 * 86_400),
               "max_duration_ms": (1, 86_400_000)}
# Alert deliveries retry like runs (domain.retry), on this fixed policy: up to 8 attempts
# over about four hours; the first backoff is configurable (tests make it short).
ALERT_MAX_ATTEMPTS = 8
ALERT_MAX_BACKOFF_SECONDS = 3600.0


@dataclass(frozen=True, slots=True)
class AlertRules:
    """None: no such alert for the schedule."""

    after_failures: int | None = None
    late_after_seconds: int | None = None
    max_duration_ms: int | None = None

    def checked(self) -> AlertRules:
        for name, (low, high) in RULE_BOUNDS.items():
            value = getattr(self, name)
            if value is not None and not low <= value <= high:
                raise RuleViolation(f"alerts.{name}", f"must be between {low} and {high}")
        return self


@dataclass(frozen=True, slots=True)
class AlertDestination:
    tenant_id: uuid.UUID
    url: str
    events: tuple[str, ...]
    created_at: datetime
    updated_at: datetime
    signing_secret: str  # shown to the tenant only when set


def checked_events(events: list[str] | None) -> tuple[str, ...]:
    """The subscribed types, in contract order; None or empty: every type."""
    if not events:
        return EVENT_TYPES
    unknown = sorted(set(events) - set(EVENT_TYPES))
    if unknown:
        raise RuleViolation("events", f"unknown event type {unknown[0]!r}; choose from "
                            f"{', '.join(EVENT_TYPES)}")
    return tuple(t for t in EVENT_TYPES if t in events)


@dataclass(frozen=True, slots=True)
class AlertEvent:
    id: uuid.UUID
    tenant_id: uuid.UUID
    schedule_id: uuid.UUID
    schedule_name: str
    type: str
    run_id: uuid.UUID | None
    at: datetime
    detail: dict[str, Any]
    status: str  # pending, delivering, retrying, delivered, failed, undelivered
    attempt_count: int
    last_status_code: int | None
    last_error: str | None
    delivered_at: datetime | None
    created_at: datetime


def event_body(event: AlertEvent) -> bytes:
    """The JSON an alert is delivered with (CONTRACT.md): run_id only when there is one."""
    document: dict[str, Any] = {
        "type": event.type, "tenant_id": str(event.tenant_id),
        "schedule_id": str(event.schedule_id), "schedule_name": event.schedule_name,
        "at": rfc3339_utc(event.at), "detail": event.detail,
    }
    if event.run_id is not None:
        document["run_id"] = str(event.run_id)
    return json.dumps(document, separators=(",", ":"), ensure_ascii=False).encode()


def alert_retry_policy(initial_backoff_seconds: float) -> RetryPolicy:
    return RetryPolicy(max_attempts=ALERT_MAX_ATTEMPTS,
                       initial_backoff_seconds=initial_backoff_seconds,
                       max_backoff_seconds=ALERT_MAX_BACKOFF_SECONDS)


@dataclass(frozen=True, slots=True)
class EventAttempt:
    """Evidence of one delivery attempt of an alert event."""

    attempt: int
    started_at: datetime
    finished_at: datetime
    outcome: str
    status_code: int | None
    error: str | None
    duration_ms: int
    response_excerpt: str | None


@dataclass(frozen=True, slots=True)
class ClaimedAlert:
    """An event whose delivery lease this replica holds, with where it goes now (None:
    the tenant has no destination any more)."""

    event: AlertEvent
    url: str | None
    signing_secret: str | None
    lease_generation: int


@dataclass(frozen=True, slots=True)
class AlertResolution:
    """The write that ends one attempt: delivered, retrying, failed or undelivered."""

    event_id: uuid.UUID
    lease_generation: int
    status: str
    retry_delay_seconds: float | None
    attempt: EventAttempt | None
