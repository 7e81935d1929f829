"""Request bodies of the schedule routes: create (with its target, retry policy and alert
rules) and the merge patch, with the examples /openapi.json shows.

Input models check types only (unknown fields refused); the rules about
values (cron syntax, ranges, header names, limits) are the domain's, in
:mod:`cronwire.domain.schedule_rules`, and the bounds advertised here are read from it so
the schema and the checks cannot drift apart.
"""

from __future__ import annotations

import uuid
from typing import Any

from pydantic import BaseModel, Field, StrictBool, StrictFloat, StrictInt

from cronwire.api.schemas_common import INPUT_CONFIG, Instant, with_examples
from cronwire.api.schemas_flow import FLOW_CONTROL_HELP, FlowControlIn
from cronwire.api.text import Text
from cronwire.domain.alerts import RULE_BOUNDS
from cronwire.domain.calendar_specs import MAX_CALENDARS_PER_SCHEDULE
from cronwire.domain.calendars import CALENDAR_POLICIES, MAX_SHIFT_DAYS
from cronwire.domain.client_tls import MAX_PEM_CHARS
from cronwire.domain.jitter import MAX_JITTER_SECONDS
from cronwire.domain.model import MAX_ATTEMPTS
from cronwire.domain.rrule_text import MAX_RRULE_CHARS
from cronwire.domain.schedule_keys import KEY_MAX_CHARS, KEY_RULE, MANAGED_BY_MAX_CHARS
from cronwire.domain.schedule_rules import (
    MAX_BACKOFF_SECONDS,
    MAX_CATCHUP_WINDOW_SECONDS,
    MAX_PAUSE_AFTER_FAILURES,
    MAX_RUNS,
    METHODS,
    MIN_BACKOFF_SECONDS,
    MISFIRE_POLICIES,
    NAME_MAX_CHARS,
    OVERLAP_POLICIES,
)
from cronwire.domain.schedules import DEFAULT_CATCHUP_WINDOW_SECONDS

EXAMPLE_TARGET = {"url": "https://example.com/hook", "method": "POST",
                  "headers": {"x-custom": "1"}, "body": "{\"k\": 1}"}
EXAMPLE_RETRY = {"max_attempts": 5, "initial_backoff_seconds": 10, "max_backoff_seconds": 3600}
EXAMPLE_CREATE: dict[str, Any] = {
    "name": "nightly-report", "cron": "0 3 * * *", "timezone": "Europe/Berlin",
    "target": EXAMPLE_TARGET, "retry": EXAMPLE_RETRY, "misfire_policy": "fire_all",
    "starts_at": None, "ends_at": None, "paused": False,
}


class ClientTlsIn(BaseModel):
    """A client certificate for receivers that require mTLS. Write-only: reads show its
    subject and expiry; the key is sealed at rest."""

    model_config = INPUT_CONFIG

    client_certificate: Text = Field(
        description="PEM certificate, leaf first (a chain may follow); not expired.",
        json_schema_extra={"maxLength": MAX_PEM_CHARS})
    client_key: Text = Field(
        description="PEM private key of the certificate, unencrypted (PKCS#8, PKCS#1 or SEC1).",
        json_schema_extra={"maxLength": MAX_PEM_CHARS})


class TargetIn(BaseModel):
    model_config = INPUT_CONFIG | with_examples(EXAMPLE_TARGET)

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
    tls: ClientTlsIn | None = Field(None, description="Client certificate (mTLS).")


class RetryIn(BaseModel):
    model_config = INPUT_CONFIG | with_examples(EXAMPLE_RETRY)

    max_attempts: StrictInt = Field(3, json_schema_extra={"minimum": 1, "maximum": MAX_ATTEMPTS})
    initial_backoff_seconds: StrictFloat = Field(
        10.0, json_schema_extra={"minimum": MIN_BACKOFF_SECONDS, "maximum": MAX_BACKOFF_SECONDS})
    max_backoff_seconds: StrictFloat = Field(
        3600.0, description="Cap of the exponential backoff; at least initial_backoff_seconds.",
        json_schema_extra={"minimum": MIN_BACKOFF_SECONDS, "maximum": MAX_BACKOFF_SECONDS})


def _bounded(name: str) -> dict[str, Any]:
    low, high = RULE_BOUNDS[name]
    return {"minimum": low, "maximum": high}


class AlertsIn(BaseModel):
    """Per-schedule alert rules (each optional); events go to the tenant's alert
    destination (PUT /v1/alerts)."""

    model_config = INPUT_CONFIG | with_examples({"after_failures": 3, "late_after_seconds": 300,
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



_NAME: dict[str, Any] = {"minLength": 1, "maxLength": NAME_MAX_CHARS}
_CRON_HELP = ("5 fields, or 6 with seconds first (`*/10 * * * * *`); @hourly-style macros; "
              "Quartz day tokens `L`, `L-n`, `nW`, `LW` (day-of-month), `d#n`, `dL` "
              "(day-of-week). Exactly one of `cron`, `rrule` and `at`.")
_RRULE_HELP = ("An RFC 5545 recurrence: an `RRULE:` line, optional `DTSTART` (read in the "
               "schedule's time zone; default midnight of today there), `EXDATE` and "
               "`RDATE` lines, separated by newlines. Instead of `cron` or `at`. DST: "
               "FREQ DAILY and coarser follow the wall-clock rule, HOURLY and finer real "
               "time (docs/scheduling.md).")
_AT_HELP = ("A one-time schedule: fires once at this instant (RFC 3339), given instead of "
            "`cron`; its status is then `completed`. No `starts_at`, `ends_at`, `max_runs`.")
_MISFIRE: dict[str, Any] = {"enum": list(MISFIRE_POLICIES)}
_CATCHUP: dict[str, Any] = {"minimum": 0, "maximum": MAX_CATCHUP_WINDOW_SECONDS}
OVERLAP_ENUM: dict[str, Any] = {"enum": list(OVERLAP_POLICIES)}
_OVERLAP_HELP = (
    "What an occurrence does while the schedule's previous run is running or retrying: "
    "`allow` starts it anyway; `skip` records it `skipped` (skip_reason `overlap`); "
    "`buffer_one` lets one wait and start when the previous run ends (more are skipped); "
    "`buffer_all` lets up to 100 wait and start in order; `cancel_other` ends the previous "
    "run `cancelled` (a request in flight is aborted, its connection closed, within about "
    "a second; a complete answer that came first is recorded as it came) and starts this one.")
_JITTER: dict[str, Any] = {"minimum": 0, "maximum": MAX_JITTER_SECONDS}
_JITTER_HELP = ("Each occurrence is delivered at scheduled_for + an offset in [0, "
                "jitter_seconds), the same on every replica (fire_after shows it).")
_MAX_RUNS: dict[str, Any] = {"minimum": 1, "maximum": MAX_RUNS}
_MAX_RUNS_HELP = ("Completed after this many scheduled occurrences (manual, backfill and "
                  "replay runs do not count).")
_PAUSE_AFTER: dict[str, Any] = {"minimum": 1, "maximum": MAX_PAUSE_AFTER_FAILURES}
_PAUSE_AFTER_HELP = ("After this many consecutive failed runs the schedule pauses itself, "
                     "with a paused_reason saying so.")


KEY_HELP = (f"Your own stable name for the schedule, unique among your live schedules: "
            f"`{KEY_RULE}`. Schedules as code match on it (PUT /v1/schedules/by-key/{{key}}, "
            "POST /v1/schedules/apply).")
KEY_SCHEMA: dict[str, Any] = {"pattern": f"^{KEY_RULE}$", "maxLength": KEY_MAX_CHARS}
MANAGED_BY_HELP = ("A label naming the tool or repository that manages the schedule "
                   "(apply's `managed_by`; prune deletes only its own). The console warns "
                   "before a hand edit of such a schedule.")
MANAGED_BY_SCHEMA: dict[str, Any] = {"minLength": 1, "maxLength": MANAGED_BY_MAX_CHARS}


CALENDARS_HELP = ("Ids of your calendars (GET /v1/calendars) whose dates this schedule "
                  f"leaves out, at most {MAX_CALENDARS_PER_SCHEDULE}; what an occurrence on "
                  "such a date becomes is `calendar_policy`.")
CALENDAR_POLICY_HELP = (
    "What an occurrence on an excluded date becomes: `skip` records it `skipped` "
    "(skip_reason `calendar`); `next_business_day` / `previous_business_day` moves it to the "
    "same local time on the nearest later / earlier day that is neither excluded nor a "
    f"Saturday or Sunday (at most {MAX_SHIFT_DAYS} days away, else skipped).")
CALENDAR_POLICY_ENUM: dict[str, Any] = {"enum": list(CALENDAR_POLICIES)}


class ScheduleCreate(BaseModel):
    model_config = INPUT_CONFIG | with_examples(EXAMPLE_CREATE)

    name: Text = Field(json_schema_extra=_NAME)
    cron: Text | None = Field(None, description=_CRON_HELP)
    rrule: Text | None = Field(None, description=_RRULE_HELP,
                               json_schema_extra={"maxLength": MAX_RRULE_CHARS})
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
    overlap_policy: Text = Field("allow", description=_OVERLAP_HELP,
                                 json_schema_extra=OVERLAP_ENUM)
    jitter_seconds: StrictInt = Field(0, description=_JITTER_HELP, json_schema_extra=_JITTER)
    max_runs: StrictInt | None = Field(None, description=_MAX_RUNS_HELP,
                                       json_schema_extra=_MAX_RUNS)
    pause_after_failures: StrictInt | None = Field(None, description=_PAUSE_AFTER_HELP,
                                                   json_schema_extra=_PAUSE_AFTER)
    alerts: AlertsIn | None = None
    flow_control: FlowControlIn | None = Field(None, description=FLOW_CONTROL_HELP)
    key: Text | None = Field(None, description=KEY_HELP, json_schema_extra=KEY_SCHEMA)
    managed_by: Text | None = Field(None, description=MANAGED_BY_HELP,
                                    json_schema_extra=MANAGED_BY_SCHEMA)
    exclude_calendars: list[uuid.UUID] = Field(
        default_factory=list, description=CALENDARS_HELP,
        max_length=MAX_CALENDARS_PER_SCHEDULE)
    calendar_policy: Text = Field("skip", description=CALENDAR_POLICY_HELP,
                                  json_schema_extra=CALENDAR_POLICY_ENUM)


class TargetPatch(BaseModel):
    """Merged into the current target: absent fields stay, null resets to the default."""

    model_config = INPUT_CONFIG

    url: Text | None = Field(None, description="Must not be null.",
                             json_schema_extra={"format": "uri", "maxLength": 2048})
    method: Text | None = Field(None, description="null: back to POST.",
                                json_schema_extra={"enum": list(METHODS)})
    headers: dict[Text, Text | None] | None = Field(
        None, description="Merged by name: a null value removes that header; null removes "
        "them all.")
    body: Text | None = Field(None, description="null: the default JSON body.")
    tls: ClientTlsIn | None = Field(
        None, description="Replaces the client certificate (both members); null removes it.")


class RetryPatch(BaseModel):
    """Merged into the current retry policy: absent fields stay, null resets the default."""

    model_config = INPUT_CONFIG

    max_attempts: StrictInt | None = Field(
        None, json_schema_extra={"minimum": 1, "maximum": MAX_ATTEMPTS})
    initial_backoff_seconds: StrictFloat | None = Field(
        None, json_schema_extra={"minimum": MIN_BACKOFF_SECONDS, "maximum": MAX_BACKOFF_SECONDS})
    max_backoff_seconds: StrictFloat | None = Field(
        None, json_schema_extra={"minimum": MIN_BACKOFF_SECONDS, "maximum": MAX_BACKOFF_SECONDS})


class SchedulePatch(BaseModel):
    """A JSON merge patch (RFC 7396): only the fields present change, and ``target`` and
    ``retry`` are merged field by field (``target.headers`` name by name)."""

    model_config = INPUT_CONFIG | with_examples({"cron": "30 4 * * *", "timezone": "UTC"},
                                                {"target": {"url": "https://example.com/v2"}},
                                                {"target": {"headers": {"x-old": None}}})

    name: Text | None = Field(None, json_schema_extra=_NAME)
    cron: Text | None = Field(None, description=_CRON_HELP + " null (with an `at`): "
                              "becomes a one-time schedule.")
    rrule: Text | None = Field(None, description=_RRULE_HELP + " null (with a `cron` or "
                               "an `at`): stops being a rule schedule.",
                               json_schema_extra={"maxLength": MAX_RRULE_CHARS})
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
                                        json_schema_extra=OVERLAP_ENUM)
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
    key: Text | None = Field(None, description=KEY_HELP + " null: no key.",
                             json_schema_extra=KEY_SCHEMA)
    managed_by: Text | None = Field(None, description=MANAGED_BY_HELP + " null: managed by "
                                    "hand.", json_schema_extra=MANAGED_BY_SCHEMA)
    exclude_calendars: list[uuid.UUID] | None = Field(
        None, description=CALENDARS_HELP + " null: none.",
        max_length=MAX_CALENDARS_PER_SCHEDULE)
    calendar_policy: Text | None = Field(None, description=CALENDAR_POLICY_HELP + " null: "
                                         "back to skip.", json_schema_extra=CALENDAR_POLICY_ENUM)
