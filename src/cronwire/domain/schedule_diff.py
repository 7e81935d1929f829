"""What changed between two schedule specs, field by field (ADR 0057). Pure, no I/O.

Both specs are first put in one normal form, so a difference of spelling is no change: a
time zone in another case ("utc" is "UTC"), header names in another case or order, a
number written as 10 or 10.0, a flow-control key left to its default (the target's
origin) or written out, a burst left to its default or written out, the defaults of
absent fields. What remains is a change the server would act on.

Header values are credentials as far as cronwire knows: a change names the header and
shows both sides as ``"***"`` (absent as None), never the values.
"""

from __future__ import annotations

from typing import Any

from cronwire.domain.cron import canonical_timezone
from cronwire.domain.flow_control import default_burst, effective_key
from cronwire.domain.schedules import ScheduleSpec
from cronwire.domain.secrets import MASK

Changes = dict[str, list[Any]]


def _flow(spec: ScheduleSpec) -> dict[str, Any] | None:
    flow = spec.flow_control
    if flow is None:
        return None
    rate = None if flow.rate_per_second is None else float(flow.rate_per_second)
    burst = flow.burst if flow.burst is not None or rate is None else default_burst(rate)
    return {"key": effective_key(flow, spec.target.url), "max_concurrency": flow.max_concurrency,
            "rate_per_second": rate, "burst": burst}


def comparable(spec: ScheduleSpec) -> dict[str, Any]:
    """Every field a tenant sets but the header values, in its normal form, by the dotted
    name a change reports it under."""
    target, retry, alerts = spec.target, spec.retry, spec.alerts
    return {
        "name": spec.name.strip(), "cron": spec.cron, "at": spec.at,
        "timezone": canonical_timezone(spec.timezone),
        "target.url": target.url, "target.method": target.method.upper(),
        "target.body": target.body,
        "retry.max_attempts": retry.max_attempts,
        "retry.initial_backoff_seconds": float(retry.initial_backoff_seconds),
        "retry.max_backoff_seconds": float(retry.max_backoff_seconds),
        "misfire_policy": spec.misfire_policy.value,
        "catchup_window_seconds": spec.catchup_window_seconds,
        "starts_at": spec.starts_at, "ends_at": spec.ends_at,
        "overlap_policy": spec.overlap_policy.value, "jitter_seconds": spec.jitter_seconds,
        "max_runs": spec.max_runs, "pause_after_failures": spec.pause_after_failures,
        "alerts.after_failures": alerts.after_failures,
        "alerts.late_after_seconds": alerts.late_after_seconds,
        "alerts.max_duration_ms": alerts.max_duration_ms,
        "flow_control": _flow(spec),
        "key": spec.key, "managed_by": spec.managed_by,
        "exclude_calendars": [str(c) for c in spec.exclude_calendars],
        "calendar_policy": spec.calendar_policy.value,
    }


def header_values(spec: ScheduleSpec) -> dict[str, str]:
    """The target's headers by lower-cased name (HTTP names are case-insensitive)."""
    return {name.lower(): value for name, value in spec.target.headers.items()}


def spec_changes(before: ScheduleSpec, after: ScheduleSpec) -> Changes:
    """``{field: [before, after]}`` for each field that differs once both are normal;
    empty when ``after`` would change nothing. Header values show as MASK."""
    old, new = comparable(before), comparable(after)
    changes: Changes = {name: [old[name], new[name]] for name in old if old[name] != new[name]}
    old_headers, new_headers = header_values(before), header_values(after)
    for name in sorted(old_headers.keys() | new_headers.keys()):
        if old_headers.get(name) != new_headers.get(name):
            changes[f"target.headers.{name}"] = [
                MASK if name in old_headers else None, MASK if name in new_headers else None]
    return changes
