"""Bodies of the observability routes: stats, explain, alerts."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from cronwire.api.schemas_runs import AttemptOut, RunOut

EXAMPLE_STATS: dict[str, Any] = {
    "window": "24h", "occurrences": 1440, "succeeded": 1420, "failed": 12,
    "skipped": {"overlap": 0, "misfire": 8, "calendar": 2}, "cancelled": 0, "success_rate": 0.9916,
    "fire_lag_ms": {"p50": 18.0, "p95": 41.0, "p99": 90.0},
    "duration_ms": {"p50": 120, "p95": 480, "p99": 1300},
    "consecutive_failures": 0, "last_success_at": "2027-03-28T01:00:00.140Z",
    "last_failure_at": "2027-03-27T17:00:02.310Z",
}


class PercentilesOut(BaseModel):
    p50: float | None
    p95: float | None
    p99: float | None


class ScheduleStatsOut(BaseModel):
    model_config = ConfigDict(json_schema_extra={"examples": [EXAMPLE_STATS]})

    window: str = Field(description="1h, 24h, 7d or 30d: runs whose scheduled_for lies in "
                        "the last window (database clock), every trigger counted.")
    occurrences: int = Field(description="Runs in the window.")
    succeeded: int
    failed: int
    skipped: dict[str, int] = Field(description="Skipped runs by skip reason: overlap, "
                                    "misfire, calendar.")
    cancelled: int
    success_rate: float | None = Field(description="succeeded / (succeeded + failed); "
                                       "null when no run finished.")
    fire_lag_ms: PercentilesOut = Field(description="First attempt start minus "
                                        "scheduled_for, of the runs that started.")
    duration_ms: PercentilesOut = Field(description="Duration of the attempt that ended "
                                        "each finished run.")
    consecutive_failures: int = Field(description="Failed runs since the latest success "
                                      "(not limited to the window).")
    last_success_at: datetime | None
    last_failure_at: datetime | None


class AlertsPut(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [
        {"url": "https://example.com/cronwire-alerts",
         "events": ["schedule.failing", "schedule.recovered", "schedule.late"]}]})

    url: str = Field(description="Absolute http(s) URL; the same address policy as "
                     "schedule targets.", json_schema_extra={"format": "uri", "maxLength": 2048})
    events: list[str] | None = Field(None, description="Event types to deliver; null or "
                                     "empty: all of them.")


class AlertsOut(BaseModel):
    url: str
    events: list[str]
    created_at: datetime
    updated_at: datetime


class AlertsSet(AlertsOut):
    signing_secret: str = Field(description="Shown once: verify alert deliveries with it "
                                "(Standard Webhooks). Every PUT issues a new one.")


class AlertEventOut(BaseModel):
    id: str
    type: str
    tenant_id: str
    schedule_id: str
    schedule_name: str
    run_id: str | None
    at: datetime
    detail: dict[str, Any]
    status: str = Field(description="pending, delivering, retrying, delivered, failed, or "
                        "undelivered (no destination for this type when it happened).")
    attempt_count: int
    last_status_code: int | None
    last_error: str | None
    delivered_at: datetime | None
    created_at: datetime
    attempts: list[AttemptOut]


class AlertEventPage(BaseModel):
    items: list[AlertEventOut]
    next_cursor: str | None


class ExplanationOut(BaseModel):
    model_config = ConfigDict(json_schema_extra={"examples": [{
        "occurrence": "2027-03-28T01:00:00Z", "verdict": "succeeded",
        "reason": "DST moved it: 02:30 did not exist on 2027-03-28 in Europe/Berlin (the "
                  "clocks jumped forward at 2027-03-28 03:00:00 CEST), and a wall-clock "
                  "schedule fires once at the end of the gap instead; run ... succeeded "
                  "with HTTP 200 after 1 attempt.",
        "run": None, "previous_occurrence": "2027-03-27T01:30:00Z",
        "next_occurrence": "2027-03-29T00:30:00Z"}]})

    occurrence: datetime | None = Field(description="The first occurrence at or after `at` "
                                        "(the cron and time zone, DST rules applied).")
    verdict: str = Field(description="succeeded, failed, pending, running, retrying, skipped, "
                         "cancelled, not_planned_yet, before_starts_at, after_ends_at, "
                         "paused, completed or no_run_recorded.")
    reason: str = Field(description="One sentence a tenant can act on.")
    run: RunOut | None = Field(description="The occurrence's run, as GET /v1/runs shows "
                               "it; null when none was recorded.")
    previous_occurrence: datetime | None
    next_occurrence: datetime | None
