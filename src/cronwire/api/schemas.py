"""Request and response bodies of the tenant API, with the examples /openapi.json shows.

Input models check types only (unknown fields refused); the rules about
values (cron syntax, ranges, header names, limits) are the domain's, in
:mod:`cronwire.domain.schedule_rules`, and the bounds advertised here are read from it so
the schema and the checks cannot drift apart.
"""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
)

from cronwire.api.schemas_flow import FLOW_CONTROL_HELP, FlowControlIn, FlowControlOut
from cronwire.api.text import Text
from cronwire.domain.alerts import RULE_BOUNDS
from cronwire.domain.jitter import MAX_JITTER_SECONDS
from cronwire.domain.model import MAX_ATTEMPTS
from cronwire.domain.schedule_rules import (
    MAX_BACKOFF_SECONDS,
    MAX_CATCHUP_WINDOW_SECONDS,
    MAX_PAUSE_AFTER_FAILURES,
    MAX_RUNS,
    METHODS,
    MISFIRE_POLICIES,
    NAME_MAX_CHARS,
    OVERLAP_POLICIES,
)
from cronwire.domain.schedules import DEFAULT_CATCHUP_WINDOW_SECONDS

_RFC3339 = re.compile(
    r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d{1,9})?([Zz]|[+-]\d{2}:\d{2})"
)


# A "+" offset sent unencoded in a query string arrives as a space.
_PLUS_AS_SPACE = re.compile(r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d{1,9})? \d{2}:\d{2}")
# Instants a client may give, in UTC: what datetime and the cron walk can still step past
# (a year-9999 local time with a negative offset is in year 10000 once in UTC).
EARLIEST_INSTANT = datetime(1, 1, 2, tzinfo=UTC)
LATEST_INSTANT = datetime(9999, 12, 30, tzinfo=UTC)


def _rfc3339_text(value: object) -> object:
    """pydantic would also read numbers as Unix timestamps ("0", -1); the contract speaks
    RFC 3339 only, so anything else is refused before parsing."""
    if isinstance(value, str) and _PLUS_AS_SPACE.fullmatch(value):
        raise ValueError("the offset's '+' arrived as a space; encode it as %2B in a query "
                         "string (e.g. 2027-01-01T00:00:00%2B01:00)")
    if not isinstance(value, str) or _RFC3339.fullmatch(value) is None:
        raise ValueError("must be an RFC 3339 date-time with an offset, e.g. 2027-01-01T00:00:00Z")
    return value


def _in_range(value: datetime) -> datetime:
    """The instant in UTC, if it lies where every later computation stays representable."""
    try:
        utc = value.astimezone(UTC)
    except OverflowError:
        utc = None
    if utc is None or not EARLIEST_INSTANT <= utc <= LATEST_INSTANT:
        raise ValueError("must lie between 0001-01-02T00:00:00Z and 9999-12-30T00:00:00Z")
    return utc


# An instant given by a client: RFC 3339 text with a UTC offset, nothing else.
Instant = Annotated[AwareDatetime, BeforeValidator(_rfc3339_text), AfterValidator(_in_range)]

RunStatusName = Literal[
    "pending", "running", "retrying", "succeeded", "failed", "skipped", "cancelled"
]
# Unknown fields are refused (a typo must not silently fall back to a default). Numbers
# and booleans are strict ("3" is not 3); strings and times parse as JSON gives them.
_INPUT = ConfigDict(extra="forbid")

EXAMPLE_TARGET = {"url": "https://example.com/hook", "method": "POST",
                  "headers": {"x-custom": "1"}, "body": "{\"k\": 1}"}
EXAMPLE_RETRY = {"max_attempts": 5, "initial_backoff_seconds": 10, "max_backoff_seconds": 3600}
EXAMPLE_CREATE: dict[str, Any] = {
    "name": "nightly-report", "cron": "0 3 * * *", "timezone": "Europe/Berlin",
    "target": EXAMPLE_TARGET, "retry": EXAMPLE_RETRY, "misfire_policy": "fire_all",
    "starts_at": None, "ends_at": None, "paused": False,
}
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
}
EXAMPLE_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
EXAMPLE_RUN: dict[str, Any] = {
    "id": "6a1c0f55-4e0b-5c1d-8a7e-2b3c4d5e6f70",
    "schedule_id": EXAMPLE_SCHEDULE["id"], "scheduled_for": "2027-03-28T01:00:00Z",
    "status": "succeeded", "attempt_count": 1, "fire_after": "2027-03-28T01:00:00Z",
    "first_attempt_at": "2027-03-28T01:00:00.012Z", "finished_at": "2027-03-28T01:00:00.140Z",
    "last_status_code": 200, "last_error": None, "trigger": "schedule",
    "skip_reason": None, "replay_of": None, "replayed_by": None,
}
EXAMPLE_ATTEMPT: dict[str, Any] = {
    "attempt": 1, "started_at": "2027-03-28T01:00:00.012Z",
    "finished_at": "2027-03-28T01:00:00.140Z", "outcome": "success", "status_code": 200,
    "error": None, "duration_ms": 128, "response_excerpt": "{\"ok\":true}",
}


def _examples(*examples: dict[str, Any]) -> ConfigDict:
    return ConfigDict(json_schema_extra={"examples": list(examples)})


class TargetIn(BaseModel):
    model_config = _INPUT | _examples(EXAMPLE_TARGET)

    url: Text = Field(description="Absolute http(s) URL; private addresses are refused.",
                      json_schema_extra={"format": "uri", "maxLength": 2048})
    method: Text = Field("POST", json_schema_extra={"enum": list(METHODS)})
    headers: dict[Text, Text] = Field(
        default_factory=dict,
        description="Extra request headers (RFC 9110 names; webhook-*, x-cronwire-* and "
        "framing headers are cronwire's own). Count limited per tenant.",
    )
    body: Text | None = Field(
        None, description="Request body; null sends the JSON {schedule_id, run_id, "
        "scheduled_for, attempt}. Size limited per tenant (max_body_bytes).",
    )


class RetryIn(BaseModel):
    model_config = _INPUT | _examples(EXAMPLE_RETRY)

    max_attempts: StrictInt = Field(3, json_schema_extra={"minimum": 1, "maximum": MAX_ATTEMPTS})
    initial_backoff_seconds: StrictFloat = Field(
        10.0, json_schema_extra={"exclusiveMinimum": 0, "maximum": MAX_BACKOFF_SECONDS})
    max_backoff_seconds: StrictFloat = Field(
        3600.0, description="Cap of the exponential backoff; at least initial_backoff_seconds.",
        json_schema_extra={"exclusiveMinimum": 0, "maximum": MAX_BACKOFF_SECONDS})


def _bounded(name: str) -> dict[str, Any]:
    low, high = RULE_BOUNDS[name]
    return {"minimum": low, "maximum": high}


class AlertsIn(BaseModel):
    """Per-schedule alert rules (each optional); events go to the tenant's alert
    destination (PUT /v1/alerts)."""

    model_config = _INPUT | _examples({"after_failures": 3, "late_after_seconds": 300,
                                       "max_duration_ms": 5000})

    after_failures: StrictInt | None = Field(
        None, description="schedule.failing after this many consecutive failed runs; "
        "schedule.recovered at the next success.", json_schema_extra=_bounded("after_failures"))
    late_after_seconds: StrictInt | None = Field(
        None, description="schedule.late when an occurrence has not started this long "
        "after it was due.", json_schema_extra=_bounded("late_after_seconds"))
    max_duration_ms: StrictInt | None = Field(
        None, description="schedule.slow when a success took longer than this.",
        json_schema_extra=_bounded("max_duration_ms"))


class AlertsOut(BaseModel):
    after_failures: int | None
    late_after_seconds: int | None
    max_duration_ms: int | None


_NAME: dict[str, Any] = {"minLength": 1, "maxLength": NAME_MAX_CHARS}
_CRON_HELP = ("5 fields, or 6 with seconds first (`*/10 * * * * *`); @hourly-style macros. "
              "Exactly one of `cron` and `at`.")
_AT_HELP = ("A one-time schedule: fires once at this instant (RFC 3339), given instead of "
            "`cron`; its status is then `completed`. No `starts_at`, `ends_at`, `max_runs`.")
_MISFIRE: dict[str, Any] = {"enum": list(MISFIRE_POLICIES)}
_CATCHUP: dict[str, Any] = {"minimum": 0, "maximum": MAX_CATCHUP_WINDOW_SECONDS}
_OVERLAP: dict[str, Any] = {"enum": list(OVERLAP_POLICIES)}
_OVERLAP_HELP = (
    "What an occurrence does while the schedule's previous run is running or retrying: "
    "`allow` starts it anyway; `skip` records it `skipped` (skip_reason `overlap`); "
    "`buffer_one` lets one wait and start when the previous run ends (more are skipped); "
    "`buffer_all` lets up to 100 wait and start in order; `cancel_other` ends the previous "
    "run `cancelled` (a request in flight finishes and is recorded) and starts this one.")
_JITTER: dict[str, Any] = {"minimum": 0, "maximum": MAX_JITTER_SECONDS}
_JITTER_HELP = ("Each occurrence is delivered at scheduled_for + an offset in [0, "
                "jitter_seconds), the same on every replica (fire_after shows it).")
_MAX_RUNS: dict[str, Any] = {"minimum": 1, "maximum": MAX_RUNS}
_MAX_RUNS_HELP = ("Completed after this many scheduled occurrences (manual, backfill and "
                  "replay runs do not count).")
_PAUSE_AFTER: dict[str, Any] = {"minimum": 1, "maximum": MAX_PAUSE_AFTER_FAILURES}
_PAUSE_AFTER_HELP = ("After this many consecutive failed runs the schedule pauses itself, "
                     "with a paused_reason saying so.")


class ScheduleCreate(BaseModel):
    model_config = _INPUT | _examples(EXAMPLE_CREATE)

    name: Text = Field(json_schema_extra=_NAME)
    cron: Text | None = Field(None, description=_CRON_HELP)
    at: Instant | None = Field(None, description=_AT_HELP)
    timezone: Text = Field("UTC", description="IANA time zone name.")
    target: TargetIn
    retry: RetryIn = RetryIn.model_validate({})
    misfire_policy: Text = Field("fire_all", json_schema_extra=_MISFIRE)
    catchup_window_seconds: StrictInt = Field(
        DEFAULT_CATCHUP_WINDOW_SECONDS, json_schema_extra=_CATCHUP,
        description="fire_all replays missed occurrences this far back, no further.")
    starts_at: Instant | None = None
    ends_at: Instant | None = Field(None, description="Must be later than starts_at.")
    paused: StrictBool = False
    overlap_policy: Text = Field("allow", description=_OVERLAP_HELP, json_schema_extra=_OVERLAP)
    jitter_seconds: StrictInt = Field(0, description=_JITTER_HELP, json_schema_extra=_JITTER)
    max_runs: StrictInt | None = Field(None, description=_MAX_RUNS_HELP,
                                       json_schema_extra=_MAX_RUNS)
    pause_after_failures: StrictInt | None = Field(None, description=_PAUSE_AFTER_HELP,
                                                   json_schema_extra=_PAUSE_AFTER)
    alerts: AlertsIn | None = None
    flow_control: FlowControlIn | None = Field(None, description=FLOW_CONTROL_HELP)


class TargetPatch(BaseModel):
    """Merged into the current target: absent fields stay, null resets to the default."""

    model_config = _INPUT

    url: Text | None = Field(None, description="Must not be null.",
                             json_schema_extra={"format": "uri", "maxLength": 2048})
    method: Text | None = Field(None, description="null: back to POST.",
                                json_schema_extra={"enum": list(METHODS)})
    headers: dict[Text, Text | None] | None = Field(
        None, description="Merged by name: a null value removes that header; null removes "
        "them all.")
    body: Text | None = Field(None, description="null: the default JSON body.")


class RetryPatch(BaseModel):
    """Merged into the current retry policy: absent fields stay, null resets the default."""

    model_config = _INPUT

    max_attempts: StrictInt | None = Field(
        None, json_schema_extra={"minimum": 1, "maximum": MAX_ATTEMPTS})
    initial_backoff_seconds: StrictFloat | None = Field(
        None, json_schema_extra={"exclusiveMinimum": 0, "maximum": MAX_BACKOFF_SECONDS})
    max_backoff_seconds: StrictFloat | None = Field(
        None, json_schema_extra={"exclusiveMinimum": 0, "maximum": MAX_BACKOFF_SECONDS})


class SchedulePatch(BaseModel):
    """A JSON merge patch (RFC 7396): only the fields present change, and ``target`` and
    ``retry`` are merged field by field (``target.headers`` name by name)."""

    model_config = _INPUT | _examples({"cron": "30 4 * * *", "timezone": "UTC"},
                                      {"target": {"url": "https://example.com/v2"}},
                                      {"target": {"headers": {"x-old": None}}})

    name: Text | None = Field(None, json_schema_extra=_NAME)
    cron: Text | None = Field(None, description=_CRON_HELP + " null (with an `at`): "
                              "becomes a one-time schedule.")
    at: Instant | None = Field(None, description=_AT_HELP + " null (with a `cron`): "
                               "becomes a cron schedule.")
    timezone: Text | None = None
    target: TargetPatch | None = None
    retry: RetryPatch | None = None
    misfire_policy: Text | None = Field(None, json_schema_extra=_MISFIRE)
    catchup_window_seconds: StrictInt | None = Field(None, json_schema_extra=_CATCHUP)
    starts_at: Instant | None = None
    ends_at: Instant | None = None
    overlap_policy: Text | None = Field(None, description="null: back to allow.",
                                        json_schema_extra=_OVERLAP)
    jitter_seconds: StrictInt | None = Field(None, description="null: back to 0.",
                                             json_schema_extra=_JITTER)
    max_runs: StrictInt | None = Field(None, description="null: no limit. A value above "
                                       "runs_planned makes a completed schedule active again.",
                                       json_schema_extra=_MAX_RUNS)
    pause_after_failures: StrictInt | None = Field(None, description="null: never pauses "
                                                   "itself.", json_schema_extra=_PAUSE_AFTER)
    alerts: AlertsIn | None = Field(None, description="Merged rule by rule; a null rule "
                                    "removes it, null removes them all.")
    flow_control: FlowControlIn | None = Field(None, description="Merged member by member "
                                               "(a null member removes that limit); null: no "
                                               "flow control.")


class TargetOut(BaseModel):
    url: str
    method: str
    headers: dict[str, str]
    body: str | None


class RetryOut(BaseModel):
    max_attempts: int
    initial_backoff_seconds: float
    max_backoff_seconds: float


class ScheduleOut(BaseModel):
    model_config = _examples(EXAMPLE_SCHEDULE)

    id: uuid.UUID
    tenant_id: uuid.UUID
    name: str
    cron: str | None = Field(description="null for a one-time schedule (see `at`).")
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


class ScheduleCreated(ScheduleOut):
    model_config = _examples({**EXAMPLE_SCHEDULE, "signing_secret": EXAMPLE_SECRET})

    signing_secret: str = Field(description="Shown once; verify deliveries with it.")


class SchedulePage(BaseModel):
    items: list[ScheduleOut]
    next_cursor: str | None = Field(description="Pass as ?cursor= for the next page; "
                                    "null on the last page.")


class FireTime(BaseModel):
    utc: datetime
    local: str = Field(description="The same instant in the schedule's time zone "
                       "(RFC 3339 with offset).", examples=["2027-03-28T03:00:00+02:00"])


class Preview(BaseModel):
    model_config = _examples({"items": [{"utc": "2027-03-28T01:00:00Z",
                                         "local": "2027-03-28T03:00:00+02:00"}]})

    items: list[FireTime]


class SecretRotated(BaseModel):
    model_config = _examples({"schedule_id": EXAMPLE_SCHEDULE["id"],
                              "signing_secret": EXAMPLE_SECRET,
                              "previous_secret_expires_at": "2027-03-29T12:00:00Z"})

    schedule_id: uuid.UUID
    signing_secret: str
    previous_secret_expires_at: datetime


class RunOut(BaseModel):
    model_config = _examples(EXAMPLE_RUN)

    id: uuid.UUID
    schedule_id: uuid.UUID
    scheduled_for: datetime
    status: RunStatusName
    attempt_count: int
    fire_after: datetime
    first_attempt_at: datetime | None
    finished_at: datetime | None
    last_status_code: int | None
    last_error: str | None
    trigger: Literal["schedule", "manual", "backfill", "replay"]
    skip_reason: str | None = Field(description="On a skipped run: `overlap` (the overlap "
                                    "policy) or `misfire` (missed while nothing ran); else "
                                    "null.")
    replay_of: uuid.UUID | None = Field(description="On a replay: the failed run it "
                                        "repeats; else null.")
    replayed_by: uuid.UUID | None = Field(description="On a failed run that was replayed: "
                                          "its replay; else null.")


class AttemptOut(BaseModel):
    model_config = _examples(EXAMPLE_ATTEMPT)

    attempt: int
    started_at: datetime
    finished_at: datetime
    outcome: str
    status_code: int | None
    error: str | None
    duration_ms: int
    response_excerpt: str | None = Field(description="At most 1 KiB of the response body.")


class RunDetailOut(RunOut):
    model_config = _examples({**EXAMPLE_RUN, "attempts": [EXAMPLE_ATTEMPT]})

    attempts: list[AttemptOut] = Field(description="At most 8, oldest first.")


class RunPage(BaseModel):
    model_config = _examples({"items": [EXAMPLE_RUN], "next_cursor": None})

    items: list[RunOut]
    next_cursor: str | None



# For the other schema modules (schemas_commands): the same input policy, examples and enum.
INPUT_CONFIG = _INPUT
OVERLAP_ENUM = _OVERLAP
with_examples = _examples
