"""Response bodies of the schedule routes (read, list, create, preview, secret rotation),
with the examples /openapi.json shows. What a client sends is in
:mod:`cronwire.api.schemas_schedule_input`, the run bodies in :mod:`cronwire.api.schemas_runs`.

This module keeps the plain name ``schemas`` because /openapi.json names its ``AlertsOut``
(a schedule's alert rules) ``cronwire__api__schemas__AlertsOut``, told apart by module
from the alert destination's in :mod:`cronwire.api.schemas_observability`: a move would
rename the component.
"""

from __future__ import annotations

import uuid
from datetime import date, datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from cronwire.api.schemas_common import with_examples
from cronwire.api.schemas_flow import FLOW_CONTROL_HELP, FlowControlOut
from cronwire.api.schemas_schedule_input import EXAMPLE_CREATE

EXAMPLE_SCHEDULE: dict[str, Any] = {
    "id": "0b7f3c52-8d7e-4a36-9d55-0f3c5a1e2b44",
    "tenant_id": "5d9f1a0e-2b3c-4d5e-8f90-1a2b3c4d5e6f",
    **{k: v for k, v in EXAMPLE_CREATE.items() if k != "paused"},
    "catchup_window_seconds": 3600, "status": "active", "paused": False, "at": None,
    "runs_planned": 0, "consecutive_failures": 0, "paused_reason": None, "paused_at": None,
    "next_fire_at": "2027-03-28T01:00:00Z", "last_fire_at": None,
    "previous_secret_expires_at": None,
    "created_at": "2027-03-27T12:00:00Z", "updated_at": "2027-03-27T12:00:00Z",
    "alerts": {"after_failures": 3, "late_after_seconds": None, "max_duration_ms": None},
    "version": 1,
}
EXAMPLE_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


class ClientTlsOut(BaseModel):
    client_certificate_subject: str = Field(description="The certificate's subject (RFC 4514).")
    client_certificate_not_after: datetime | None = Field(
        description="When the certificate expires; deliveries fail at the receiver after it.")


class TargetOut(BaseModel):
    url: str
    method: str
    headers: dict[str, str] = Field(description='Every value reads as "***".')
    body: str | None
    tls: ClientTlsOut | None = Field(
        None, description="The client certificate presented to the receiver (mTLS); the "
        "certificate and key are write-only.")


class RetryOut(BaseModel):
    max_attempts: int
    initial_backoff_seconds: float
    max_backoff_seconds: float


class AlertsOut(BaseModel):
    after_failures: int | None
    late_after_seconds: int | None
    max_duration_ms: int | None


class ScheduleOut(BaseModel):
    model_config = with_examples(EXAMPLE_SCHEDULE)

    id: uuid.UUID
    tenant_id: uuid.UUID
    name: str
    cron: str | None = Field(description="null for a one-time schedule (see `at`) or an "
                             "`rrule` one.")
    rrule: str | None = Field(None, description="The RFC 5545 rule, as stored (local "
                              "times, DTSTART written), else null.")
    at: datetime | None = Field(description="A one-time schedule's instant, else null.")
    timezone: str
    target: TargetOut
    retry: RetryOut
    misfire_policy: Literal["fire_all", "fire_once", "skip"]
    catchup_window_seconds: int
    overlap_policy: Literal["allow", "skip", "buffer_one", "buffer_all", "cancel_other"]
    jitter_seconds: int
    max_runs: int | None
    pause_after_failures: int | None
    flow_control: FlowControlOut | None = Field(description=FLOW_CONTROL_HELP)
    status: Literal["active", "paused", "completed"] = Field(
        description="`completed`: a one-time schedule's occurrence, or `max_runs` "
        "occurrences, were planned; nothing fires after.")
    paused: bool
    paused_reason: str | None = Field(
        description="The pause note, or why the schedule paused itself "
        "(pause_after_failures); null unless paused.")
    paused_at: datetime | None
    runs_planned: int = Field(description="Scheduled occurrences planned so far (what "
                              "max_runs counts).")
    consecutive_failures: int = Field(description="Failed runs since the last success.")
    starts_at: datetime | None
    ends_at: datetime | None
    next_fire_at: datetime | None = Field(
        description="The planner's cursor: the first occurrence not yet planned as a run. "
        "The planner works a few seconds ahead (SCHEDULER_PLANNER_LOOKAHEAD_SECONDS), so an "
        "occurrence due within that lookahead may already be a pending run and this is the "
        "one after it. null: no further occurrence.")
    last_fire_at: datetime | None = Field(
        description="The latest occurrence planned as a run (pending, running or finished; "
        "see /v1/runs for its outcome). null: none planned yet.")
    previous_secret_expires_at: datetime | None = Field(
        description="Until then the previous signing secret also signs deliveries.")
    created_at: datetime
    updated_at: datetime
    alerts: AlertsOut
    version: int = Field(description="1 on create, +1 per change (edit, pause, resume, "
                         "restore, secret rotation); also the `ETag`. Send it back as "
                         "`If-Match` to refuse a change made against a stale read.")
    key: str | None = Field(None, description="Your unique name for it (schedules as code); "
                            "null: none.")
    managed_by: str | None = Field(None, description="The tool that manages it; null: "
                                   "managed by hand.")
    exclude_calendars: list[uuid.UUID] = Field(
        default_factory=list, description="The calendars whose dates it leaves out.")
    calendar_policy: Literal["skip", "next_business_day", "previous_business_day"] = Field(
        "skip", description="What an occurrence on an excluded date becomes.")


class ScheduleCreated(ScheduleOut):
    model_config = with_examples({**EXAMPLE_SCHEDULE, "signing_secret": EXAMPLE_SECRET})

    signing_secret: str = Field(description="Shown once; verify deliveries with it.")


class ScheduleResumed(ScheduleOut):
    model_config = with_examples({**EXAMPLE_SCHEDULE, "runs_due": 12, "dry_run": False})

    runs_due: int = Field(description="Runs the resume makes due at once: the missed "
                          "occurrences `misfire_policy` keeps (`fire_all`: every one within "
                          "`catchup_window_seconds`) and those due by now, within `max_runs`; "
                          "counted up to 10,000.")
    dry_run: bool = Field(description="true: nothing changed (the schedule as it is).")


class SchedulePage(BaseModel):
    items: list[ScheduleOut]
    next_cursor: str | None = Field(description="Pass as ?cursor= for the next page; "
                                    "null on the last page.")


class FireTime(BaseModel):
    utc: datetime
    local: str = Field(description="The same instant in the schedule's time zone "
                       "(RFC 3339 with offset).", examples=["2027-03-28T03:00:00+02:00"])
    skipped: bool = Field(False, description="true: its date is in an excluded calendar "
                          "(`calendar`); it will be recorded as a skipped run.")
    shifted_from: date | None = Field(None, description="The excluded local date an "
                                      "occurrence was moved from to fire here "
                                      "(calendar_policy next/previous_business_day).")
    calendar: str | None = Field(None, description="The calendar that excludes the date "
                                 "(skipped or shifted_from); null otherwise.")


class Preview(BaseModel):
    model_config = with_examples({"items": [{"utc": "2027-03-28T01:00:00Z",
                                             "local": "2027-03-28T03:00:00+02:00"}]})

    items: list[FireTime]


class SecretRotated(BaseModel):
    model_config = with_examples({"schedule_id": EXAMPLE_SCHEDULE["id"],
                                  "signing_secret": EXAMPLE_SECRET,
                                  "previous_secret_expires_at": "2027-03-29T12:00:00Z"})

    schedule_id: uuid.UUID
    signing_secret: str
    previous_secret_expires_at: datetime
