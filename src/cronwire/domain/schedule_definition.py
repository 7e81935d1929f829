"""A schedule's definition as one JSON document: what a revision keeps, what a restore
brings back and what the audit log diffs (domain/audit.py). Pure; instants as RFC 3339."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from cronwire.domain.alerts import AlertRules
from cronwire.domain.calendars import CalendarPolicy
from cronwire.domain.documents import (
    retry_from_document,
    retry_to_document,
    target_from_document,
    target_to_document,
)
from cronwire.domain.flow_control import flow_from_document, flow_to_document
from cronwire.domain.model import MisfirePolicy, OverlapPolicy
from cronwire.domain.schedules import ScheduleRecord, ScheduleSpec


def _instant(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat().replace("+00:00", "Z")


def _parsed(value: Any) -> datetime | None:
    return None if value is None else datetime.fromisoformat(str(value))


def spec_definition(spec: ScheduleSpec) -> dict[str, Any]:
    """Every field a tenant controls, in clear (the caller seals header values to store it)."""
    rules = spec.alerts
    return {
        "name": spec.name, "cron": spec.cron, "at": _instant(spec.at),
        "timezone": spec.timezone, "target": target_to_document(spec.target),
        "retry": retry_to_document(spec.retry), "misfire_policy": spec.misfire_policy.value,
        "catchup_window_seconds": spec.catchup_window_seconds,
        "starts_at": _instant(spec.starts_at), "ends_at": _instant(spec.ends_at),
        "overlap_policy": spec.overlap_policy.value, "jitter_seconds": spec.jitter_seconds,
        "max_runs": spec.max_runs, "pause_after_failures": spec.pause_after_failures,
        "alerts": {"after_failures": rules.after_failures,
                   "late_after_seconds": rules.late_after_seconds,
                   "max_duration_ms": rules.max_duration_ms},
        "flow_control": flow_to_document(spec.flow_control),
        "exclude_calendars": [str(c) for c in spec.exclude_calendars],
        "calendar_policy": spec.calendar_policy.value,
    }


def spec_from_definition(doc: Mapping[str, Any]) -> ScheduleSpec:
    alerts = doc.get("alerts") or {}
    return ScheduleSpec(
        name=doc["name"], cron=doc.get("cron"), at=_parsed(doc.get("at")),
        timezone=doc.get("timezone") or "UTC", target=target_from_document(doc.get("target")),
        retry=retry_from_document(doc.get("retry")),
        misfire_policy=MisfirePolicy(doc["misfire_policy"]),
        catchup_window_seconds=int(doc["catchup_window_seconds"]),
        starts_at=_parsed(doc.get("starts_at")), ends_at=_parsed(doc.get("ends_at")),
        overlap_policy=OverlapPolicy(doc["overlap_policy"]),
        jitter_seconds=int(doc.get("jitter_seconds") or 0), max_runs=doc.get("max_runs"),
        pause_after_failures=doc.get("pause_after_failures"),
        alerts=AlertRules(alerts.get("after_failures"), alerts.get("late_after_seconds"),
                          alerts.get("max_duration_ms")),
        flow_control=flow_from_document(doc.get("flow_control")),
        exclude_calendars=tuple(uuid.UUID(c) for c in doc.get("exclude_calendars") or ()),
        calendar_policy=CalendarPolicy(doc.get("calendar_policy") or "skip"),
    )


def schedule_fields(record: ScheduleRecord) -> dict[str, Any]:
    """What the audit log compares between two states of a schedule: its definition and
    whether (and why) it is paused."""
    return {**spec_definition(record.spec), "status": record.status.value,
            "paused_reason": record.paused_reason}
