"""Whether a schedule is acceptable, and when it fires next. Pure: ``now`` is an argument.

Every refusal names the field it is about (``RuleViolation.field``) or the per-tenant
limit it hits (``LimitExceeded.limit``), because the API turns them into 422/429 answers
whose message a tenant can act on. The address policy that needs DNS (SSRF at create
time) is the HTTP guard's job and runs after these rules.
"""

from __future__ import annotations

import math
import re
from dataclasses import replace
from datetime import datetime

from cronwire.domain.calendar_specs import check_calendar_ids
from cronwire.domain.calendar_walk import effective_next
from cronwire.domain.calendars import NO_EXCLUSIONS, Exclusions
from cronwire.domain.client_tls import check_not_expired
from cronwire.domain.cron import canonical_timezone, load_timezone
from cronwire.domain.delivery import HEADER_VALUE_CONTROLS
from cronwire.domain.errors import (
    DomainError,
    InvalidTarget,
    InvalidTimezone,
    LimitExceeded,
    RuleViolation,
)
from cronwire.domain.flow_control import check_flow_control
from cronwire.domain.jitter import MAX_JITTER_SECONDS
from cronwire.domain.labels import check_label
from cronwire.domain.model import (
    MAX_ATTEMPTS,
    MisfirePolicy,
    OverlapPolicy,
    RetryPolicy,
    ScheduleStatus,
    Target,
)
from cronwire.domain.model import METHODS as METHODS  # re-exported: the API's schemas name it here
from cronwire.domain.netpolicy import validate_target_url
from cronwire.domain.schedule_keys import check_key, check_managed_by
from cronwire.domain.schedules import ScheduleRecord, ScheduleSpec, TenantLimits
from cronwire.domain.timetable_rules import check_timetable, min_gap

MISFIRE_POLICIES = tuple(policy.value for policy in MisfirePolicy)
OVERLAP_POLICIES = tuple(policy.value for policy in OverlapPolicy)
MAX_RUNS = 1_000_000
MAX_PAUSE_AFTER_FAILURES = 100
PAUSE_NOTE_MAX_CHARS = 1000
NAME_MAX_CHARS = 200
MAX_BACKOFF_SECONDS = 86_400.0
MIN_BACKOFF_SECONDS = 0.01
MAX_CATCHUP_WINDOW_SECONDS = 7 * 86_400
MAX_HEADER_VALUE_CHARS = 8192
PREVIEW_MAX = 1000
# RFC 9110 section 5.6.2: a field name is a token.
HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
# Headers cronwire writes itself, or that the HTTP client derives from the request:
# a tenant value would be dropped at delivery, so it is refused up front instead.
RESERVED_HEADERS = frozenset(
    {"host", "content-length", "transfer-encoding", "connection", "keep-alive", "upgrade",
     "te", "trailer", "proxy-authorization", "proxy-connection", "user-agent"}
)
RESERVED_HEADER_PREFIXES = ("webhook-", "x-cronwire-")


def field_of(error: DomainError, default: str) -> str:
    """The field a domain message starts with (``"target.url: ..."``), else ``default``."""
    head, sep, _ = str(error).partition(": ")
    return head if sep and re.fullmatch(r"[a-z_][a-z0-9_.]*", head) else default


def validate_spec(spec: ScheduleSpec, limits: TenantLimits, now: datetime,
                  before: ScheduleSpec | None = None) -> ScheduleSpec:
    """The spec, normalised, if every rule and limit holds; else the first refusal.

    ``now`` (the database clock) only anchors the sample of fire times the minimum
    interval is measured on. ``before``: the stored spec a PATCH edits; a label it keeps
    unchanged (name, flow-control key) is not checked again, so a name an older release
    accepted does not make a change to another field fail.
    """
    if before is None or spec.name != before.name:
        check_label("name", spec.name, NAME_MAX_CHARS)
    if spec.key is not None:
        check_key(spec.key)
    if spec.managed_by is not None and (before is None or spec.managed_by != before.managed_by):
        check_managed_by(spec.managed_by)
    # A zone spelt in another case is that zone ("utc" is UTC): stored as IANA spells it,
    # so a file saying "utc" and a schedule saying "UTC" do not differ.
    spec = replace(spec, timezone=canonical_timezone(spec.timezone))
    spec = check_timetable(spec, now)
    try:
        load_timezone(spec.timezone)
    except InvalidTimezone as exc:
        raise RuleViolation("timezone", str(exc).removeprefix("timezone: ")) from None
    target = _check_target(spec.target, limits)
    if spec.target.tls is not None and (before is None or before.target.tls != spec.target.tls):
        check_not_expired(spec.target.tls, now)  # one kept from before may expire in place
    _check_retry(spec.retry)
    if not 0 <= spec.catchup_window_seconds <= MAX_CATCHUP_WINDOW_SECONDS:
        raise RuleViolation(
            "catchup_window_seconds", f"must be between 0 and {MAX_CATCHUP_WINDOW_SECONDS}"
        )
    if spec.starts_at is not None and spec.ends_at is not None:
        if not spec.starts_at < spec.ends_at:
            raise RuleViolation("ends_at", "must be later than starts_at")
    _check_semantics(spec, before)
    spec = replace(spec, exclude_calendars=check_calendar_ids(spec.exclude_calendars))
    spec.alerts.checked()
    if spec.timetable is None:  # a one-time schedule has no interval to limit
        return replace(spec, name=spec.name.strip(), target=target)
    gap = min_gap(spec, now)
    if gap < limits.min_interval_seconds:
        raise LimitExceeded(
            "min_interval_seconds", "cron" if spec.cron is not None else "rrule",
            f"fires every {gap:g}s; this tenant's minimum interval is "
            f"{limits.min_interval_seconds}s",
        )
    return replace(spec, name=spec.name.strip(), target=target)


def _check_semantics(spec: ScheduleSpec, before: ScheduleSpec | None) -> None:
    if not 0 <= spec.jitter_seconds <= MAX_JITTER_SECONDS:
        raise RuleViolation("jitter_seconds", f"must be between 0 and {MAX_JITTER_SECONDS}")
    if spec.max_runs is not None and not 1 <= spec.max_runs <= MAX_RUNS:
        raise RuleViolation("max_runs", f"must be between 1 and {MAX_RUNS:,}")
    if spec.pause_after_failures is not None and not (
            1 <= spec.pause_after_failures <= MAX_PAUSE_AFTER_FAILURES):
        raise RuleViolation("pause_after_failures",
                            f"must be between 1 and {MAX_PAUSE_AFTER_FAILURES}")
    if spec.flow_control is not None:
        stored = before.flow_control if before is not None else None
        check_flow_control(spec.flow_control, stored.key if stored is not None else None)


def parse_overlap_policy(value: str, field: str = "overlap_policy") -> OverlapPolicy:
    try:
        return OverlapPolicy(value)
    except ValueError:
        raise RuleViolation(field, f"must be one of {', '.join(OVERLAP_POLICIES)}") from None


def parse_misfire_policy(value: str) -> MisfirePolicy:
    try:
        return MisfirePolicy(value)
    except ValueError:
        raise RuleViolation(
            "misfire_policy", f"must be one of {', '.join(MISFIRE_POLICIES)}"
        ) from None


def _check_target(target: Target, limits: TenantLimits) -> Target:
    try:
        validate_target_url(target.url)
    except InvalidTarget as exc:
        raise RuleViolation("target.url", str(exc).removeprefix("target.url: ")) from None
    if target.method not in METHODS:
        raise RuleViolation("target.method", f"must be one of {', '.join(METHODS)}")
    if len(target.headers) > limits.max_headers:
        raise LimitExceeded(
            "max_headers", "target.headers",
            f"{len(target.headers)} headers; this tenant's limit is {limits.max_headers}",
        )
    for name, value in target.headers.items():
        _check_header(name, value)
    if target.body is not None:
        size = len(target.body.encode("utf-8"))
        if size > limits.max_body_bytes:
            raise LimitExceeded(
                "max_body_bytes", "target.body",
                f"{size} bytes; this tenant's limit is {limits.max_body_bytes}",
            )
    return replace(target, headers=dict(target.headers))


def _check_header(name: str, value: str) -> None:
    if not HEADER_NAME.fullmatch(name):
        raise RuleViolation("target.headers", f"{name!r} is not a valid header name (RFC 9110)")
    lowered = name.lower()
    if lowered in RESERVED_HEADERS or lowered.startswith(RESERVED_HEADER_PREFIXES):
        raise RuleViolation("target.headers", f"{name!r} is set by cronwire and cannot be set")
    if len(value) > MAX_HEADER_VALUE_CHARS:
        raise RuleViolation(
            "target.headers", f"value of {name!r} is longer than {MAX_HEADER_VALUE_CHARS}"
        )
    if HEADER_VALUE_CONTROLS.search(value):
        raise RuleViolation(
            "target.headers",
            f"value of {name!r} contains a control character (only HTAB is allowed)")


def _check_retry(retry: RetryPolicy) -> None:
    if not 1 <= retry.max_attempts <= MAX_ATTEMPTS:
        raise RuleViolation("retry.max_attempts", f"must be between 1 and {MAX_ATTEMPTS}")
    initial, cap = retry.initial_backoff_seconds, retry.max_backoff_seconds
    if not (math.isfinite(initial) and MIN_BACKOFF_SECONDS <= initial <= MAX_BACKOFF_SECONDS):
        raise RuleViolation(
            "retry.initial_backoff_seconds",
            f"must be between {MIN_BACKOFF_SECONDS:g} and {MAX_BACKOFF_SECONDS:g}",
        )
    if not (math.isfinite(cap) and initial <= cap <= MAX_BACKOFF_SECONDS):
        raise RuleViolation(
            "retry.max_backoff_seconds",
            f"must be >= initial_backoff_seconds and <= {MAX_BACKOFF_SECONDS:g}",
        )


def next_fire_after(spec: ScheduleSpec, after: datetime,
                    exclusions: Exclusions = NO_EXCLUSIONS) -> datetime | None:
    """The first fire strictly after ``after`` inside [starts_at, ends_at]; None if none.
    With ``exclusions`` (the dates of the spec's calendars): of the effective timetable,
    shifted and calendar-skipped instants included (domain/calendars.py)."""
    if spec.timetable is None:
        return spec.at if spec.at is not None and spec.at > after else None
    fires = effective_next(spec.timetable, spec.timezone, after, 1, exclusions,
                           starts_at=spec.starts_at, ends_at=spec.ends_at)
    return fires[0] if fires else None


def first_fire(spec: ScheduleSpec, now: datetime,
               exclusions: Exclusions = NO_EXCLUSIONS) -> datetime | None:
    """A new schedule's cursor: its ``at`` (even if past: the misfire policy then decides
    about it, as for any occurrence missed), else its first cron fire after ``now``."""
    return spec.at if spec.timetable is None else next_fire_after(spec, now, exclusions)


def rescheduled_next_fire(
    old: ScheduleSpec,
    new: ScheduleSpec,
    next_fire_at: datetime | None,
    last_fire_at: datetime | None,
    now: datetime,
    exclusions: Exclusions = NO_EXCLUSIONS,
) -> datetime | None:
    """The planner cursor after an edit (``exclusions``: those of ``new``).

    Unchanged unless the timing changed. Then the next fire is counted from the later of
    ``now`` and the last occurrence already materialised, so nothing the planner already
    wrote is planned again (and UNIQUE (schedule_id, scheduled_for) backs that up).
    """
    if not old.timing_differs(new):
        return next_fire_at
    if new.timetable is None:
        return new.at  # a new `at` is planned as given, past or not (see first_fire)
    after = now if last_fire_at is None else max(now, last_fire_at)
    return next_fire_after(new, after, exclusions)


def status_after_edit(
    current: ScheduleRecord, new: ScheduleSpec, next_fire_at: datetime | None,
    last_fire_at: datetime | None, now: datetime, exclusions: Exclusions = NO_EXCLUSIONS,
) -> tuple[ScheduleStatus, datetime | None]:
    """The status and cursor after an edit. A ``max_runs`` at or below the runs already
    planned completes the schedule at once; a completed schedule given another occurrence
    (a new ``at``, a higher ``max_runs``) is active again, from its next fire after both
    now and its last planned occurrence. Paused stays paused."""
    used_up = new.max_runs is not None and current.runs_planned >= new.max_runs
    if current.status is ScheduleStatus.ACTIVE and used_up and new.timetable is not None:
        return ScheduleStatus.COMPLETED, None
    if current.status is not ScheduleStatus.COMPLETED:
        return current.status, next_fire_at
    if new.timetable is None:
        if current.spec.at != new.at:
            return ScheduleStatus.ACTIVE, new.at
        return current.status, next_fire_at
    if used_up:
        return current.status, None
    after = now if last_fire_at is None else max(now, last_fire_at)
    following = next_fire_after(new, after, exclusions)
    return (ScheduleStatus.COMPLETED, None) if following is None else (
        ScheduleStatus.ACTIVE, following)


def preview(spec: ScheduleSpec, now: datetime, count: int,
            exclusions: Exclusions = NO_EXCLUSIONS) -> list[datetime]:
    """The next ``count`` fire times after ``max(now, starts_at)``, none after ``ends_at``
    (of the effective timetable: calendar-skipped instants included, shifted ones where
    they fire; :func:`cronwire.domain.calendars.verdict` tells them apart)."""
    if not 1 <= count <= PREVIEW_MAX:
        raise RuleViolation("count", f"must be between 1 and {PREVIEW_MAX}")
    if spec.timetable is None:
        return [spec.at] if spec.at is not None and spec.at > now else []
    return effective_next(spec.timetable, spec.timezone, now, count, exclusions,
                          starts_at=spec.starts_at, ends_at=spec.ends_at)


def replanned_cursor(record: ScheduleRecord, exclusions: Exclusions,
                     last_fire_at: datetime | None, now: datetime) -> datetime | None:
    """The cursor of a schedule whose calendars' dates changed, once the runs it planned
    ahead are taken back: a cursor already due stays (the planner walks from it on the
    new dates, and a paused schedule's misfire policy still decides on resume); one
    ahead moves to the first effective instant after both now and ``last_fire_at``."""
    if record.status is ScheduleStatus.COMPLETED:
        return record.next_fire_at
    if record.next_fire_at is not None and record.next_fire_at <= now:
        return record.next_fire_at
    after = now if last_fire_at is None else max(now, last_fire_at)
    return next_fire_after(record.spec, after, exclusions)
