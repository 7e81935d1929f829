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

from cronwire.domain.cron import load_timezone, min_gap_seconds, next_occurrences, parse_cron
from cronwire.domain.delivery import HEADER_VALUE_CONTROLS
from cronwire.domain.errors import (
    DomainError,
    InvalidCron,
    InvalidTarget,
    InvalidTimezone,
    LimitExceeded,
    RuleViolation,
)
from cronwire.domain.model import MAX_ATTEMPTS, MisfirePolicy, RetryPolicy, Target
from cronwire.domain.model import METHODS as METHODS  # re-exported: api/schemas.py names it here
from cronwire.domain.netpolicy import validate_target_url
from cronwire.domain.schedules import ScheduleSpec, TenantLimits

MISFIRE_POLICIES = tuple(policy.value for policy in MisfirePolicy)
NAME_MAX_CHARS = 200
MAX_BACKOFF_SECONDS = 86_400.0
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


def validate_spec(spec: ScheduleSpec, limits: TenantLimits, now: datetime) -> ScheduleSpec:
    """The spec, normalised, if every rule and limit holds; else the first refusal.

    ``now`` (the database clock) only anchors the sample of fire times the minimum
    interval is measured on.
    """
    _check_name(spec.name)
    try:
        parse_cron(spec.cron)
    except InvalidCron as exc:
        raise RuleViolation("cron", str(exc).removeprefix("cron: ")) from None
    try:
        load_timezone(spec.timezone)
    except InvalidTimezone as exc:
        raise RuleViolation("timezone", str(exc).removeprefix("timezone: ")) from None
    target = _check_target(spec.target, limits)
    _check_retry(spec.retry)
    if not 0 <= spec.catchup_window_seconds <= MAX_CATCHUP_WINDOW_SECONDS:
        raise RuleViolation(
            "catchup_window_seconds", f"must be between 0 and {MAX_CATCHUP_WINDOW_SECONDS}"
        )
    if spec.starts_at is not None and spec.ends_at is not None:
        if not spec.starts_at < spec.ends_at:
            raise RuleViolation("ends_at", "must be later than starts_at")
    spec.alerts.checked()
    gap = min_gap_seconds(spec.cron, spec.timezone, now)
    if gap < limits.min_interval_seconds:
        raise LimitExceeded(
            "min_interval_seconds", "cron",
            f"fires every {gap:g}s; this tenant's minimum interval is "
            f"{limits.min_interval_seconds}s",
        )
    return replace(spec, name=spec.name.strip(), target=target)


def parse_misfire_policy(value: str) -> MisfirePolicy:
    try:
        return MisfirePolicy(value)
    except ValueError:
        raise RuleViolation(
            "misfire_policy", f"must be one of {', '.join(MISFIRE_POLICIES)}"
        ) from None


def _check_name(name: str) -> None:
    if not name.strip() or len(name) > NAME_MAX_CHARS:
        raise RuleViolation("name", f"must be 1 to {NAME_MAX_CHARS} characters, not blank")


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
    if not (math.isfinite(initial) and 0 < initial <= MAX_BACKOFF_SECONDS):
        raise RuleViolation(
            "retry.initial_backoff_seconds", f"must be > 0 and <= {MAX_BACKOFF_SECONDS:g}"
        )
    if not (math.isfinite(cap) and initial <= cap <= MAX_BACKOFF_SECONDS):
        raise RuleViolation(
            "retry.max_backoff_seconds",
            f"must be >= initial_backoff_seconds and <= {MAX_BACKOFF_SECONDS:g}",
        )


def next_fire_after(spec: ScheduleSpec, after: datetime) -> datetime | None:
    """The first fire strictly after ``after`` inside [starts_at, ends_at]; None if none."""
    fires = next_occurrences(
        spec.cron, spec.timezone, after, 1, starts_at=spec.starts_at, ends_at=spec.ends_at
    )
    return fires[0] if fires else None


def rescheduled_next_fire(
    old: ScheduleSpec,
    new: ScheduleSpec,
    next_fire_at: datetime | None,
    last_fire_at: datetime | None,
    now: datetime,
) -> datetime | None:
    """The planner cursor after an edit.

    Unchanged unless the timing changed. Then the next fire is counted from the later of
    ``now`` and the last occurrence already materialised, so nothing the planner already
    wrote is planned again (and UNIQUE (schedule_id, scheduled_for) backs that up).
    """
    if not old.timing_differs(new):
        return next_fire_at
    after = now if last_fire_at is None else max(now, last_fire_at)
    return next_fire_after(new, after)


def preview(spec: ScheduleSpec, now: datetime, count: int) -> list[datetime]:
    """The next ``count`` fire times after ``max(now, starts_at)``, none after ``ends_at``."""
    if not 1 <= count <= PREVIEW_MAX:
        raise RuleViolation("count", f"must be between 1 and {PREVIEW_MAX}")
    return next_occurrences(
        spec.cron, spec.timezone, now, count, starts_at=spec.starts_at, ends_at=spec.ends_at
    )
