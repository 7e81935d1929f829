"""PATCH as a JSON merge patch (RFC 7396) over a schedule's current spec.

Only the members present change. ``target`` and ``retry`` are objects, so they are merged
member by member, and ``target.headers`` name by name. A null removes what it names where
removing means something: a header, ``target.body`` (back to the default JSON body),
``target.method`` and the ``retry`` numbers (back to their defaults), ``starts_at`` and
``ends_at`` (no bound), ``cron`` or ``at`` (when the other is given: a cron schedule
becomes one-time or back), ``max_runs`` and ``pause_after_failures`` (no limit),
``overlap_policy`` and ``jitter_seconds`` (back to ``allow`` and 0), ``alerts`` (no rules;
an object is merged rule by rule) and ``flow_control`` (none; an object is merged member
by member, a null member removing that limit). A null for anything a schedule cannot lack
(``name``, ``target.url``, ...) is a 422 naming it.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from cronwire.api.mapping import tls_from
from cronwire.api.schemas_flow import FlowControlIn
from cronwire.api.schemas_schedule_input import AlertsIn, RetryPatch, SchedulePatch, TargetPatch
from cronwire.domain.alerts import AlertRules
from cronwire.domain.calendars import CalendarPolicy, parse_calendar_policy
from cronwire.domain.errors import RuleViolation
from cronwire.domain.flow_control import FlowControl
from cronwire.domain.model import OverlapPolicy, RetryPolicy, Target
from cronwire.domain.schedule_rules import parse_misfire_policy, parse_overlap_policy
from cronwire.domain.schedules import ScheduleSpec
from cronwire.domain.secrets import MASK

NULLABLE = frozenset({"starts_at", "ends_at", "cron", "rrule", "at", "max_runs",
                      "pause_after_failures", "alerts", "flow_control", "key", "managed_by"})
# A null puts these back to their defaults.
DEFAULTS: dict[str, Any] = {"overlap_policy": OverlapPolicy.ALLOW, "jitter_seconds": 0,
                            "exclude_calendars": (), "calendar_policy": CalendarPolicy.SKIP}
DEFAULT_METHOD = "POST"


def patched_spec(spec: ScheduleSpec, patch: SchedulePatch) -> ScheduleSpec:
    """``spec`` with ``patch`` merged in (not yet validated against the rules)."""
    changes: dict[str, Any] = {}
    for name in sorted(patch.model_fields_set):
        value = getattr(patch, name)
        if value is None and name in DEFAULTS:
            value = DEFAULTS[name]
        elif value is None and name not in NULLABLE:
            raise RuleViolation(name, "must not be null")
        elif isinstance(value, TargetPatch):
            value = _patched_target(spec.target, value)
        elif isinstance(value, RetryPatch):
            value = _patched_retry(spec.retry, value)
        elif isinstance(value, FlowControlIn):
            value = _patched_flow(spec.flow_control, value)
        elif name == "misfire_policy":
            value = parse_misfire_policy(value)
        elif name == "overlap_policy":
            value = parse_overlap_policy(value)
        elif name == "alerts":
            value = _patched_alerts(spec.alerts, value)
        elif name == "calendar_policy":
            value = parse_calendar_policy(value)
        elif name == "exclude_calendars":
            value = tuple(value)
        changes[name] = value
    return spec.with_changes(changes)


def url_changed(patch: SchedulePatch) -> str | None:
    """The new target URL the patch sets, if any (the address policy must see it)."""
    if patch.target is not None and "url" in patch.target.model_fields_set:
        return patch.target.url
    return None


def _patched_target(target: Target, patch: TargetPatch) -> Target:
    sent = patch.model_fields_set
    if "url" in sent and patch.url is None:
        raise RuleViolation("target.url", "must not be null")
    headers = dict(target.headers)
    if "headers" in sent:
        if patch.headers is None:
            headers = {}
        else:
            for name, value in patch.headers.items():
                _merge_header(headers, name, value)
    return replace(
        target,
        url=patch.url if patch.url is not None else target.url,
        method=(patch.method or DEFAULT_METHOD) if "method" in sent else target.method,
        headers=headers,
        body=patch.body if "body" in sent else target.body,
        tls=tls_from(patch.tls) if "tls" in sent else target.tls,
    )


def _merge_header(headers: dict[str, str], name: str, value: str | None) -> None:
    """Set or (null) remove one header; names are case-insensitive in HTTP, so a change
    replaces any spelling of the same name. MASK (what reads show for every value) keeps
    the stored value, so a form sending back what it read changes nothing."""
    if value == MASK:
        if not any(n.lower() == name.lower() for n in headers):
            raise RuleViolation(f"target.headers.{name}",
                                f"{MASK!r} keeps a stored value, and this header has none")
        return
    for existing in [n for n in headers if n.lower() == name.lower()]:
        del headers[existing]
    if value is not None:
        headers[name] = value


def _patched_retry(retry: RetryPolicy, patch: RetryPatch) -> RetryPolicy:
    defaults = RetryPolicy()
    values: dict[str, Any] = {}
    for name in patch.model_fields_set:
        value = getattr(patch, name)
        values[name] = getattr(defaults, name) if value is None else value
    return replace(retry, **values)


def _patched_alerts(rules: AlertRules, patch: AlertsIn | None) -> AlertRules:
    """Rule by rule: a rule present replaces (null removes it); null removes them all."""
    if patch is None:
        return AlertRules()
    return replace(rules, **{name: getattr(patch, name) for name in patch.model_fields_set})


def _patched_flow(flow: FlowControl | None, patch: FlowControlIn) -> FlowControl:
    """The current flow control (none: no limits yet) with the members sent replaced."""
    values: dict[str, Any] = {}
    for name in patch.model_fields_set:
        value = getattr(patch, name)
        values[name] = float(value) if name == "rate_per_second" and value is not None else value
    return replace(flow or FlowControl(), **values)
