"""A schedule's columns in the order schedule_insert and schedule_update take them
(queries/schedule.sql), the target's header values sealed."""

from __future__ import annotations

import uuid

from cronwire.adapters.postgres.sealed_fields import sealed_target
from cronwire.domain.documents import retry_to_document, target_to_document
from cronwire.domain.schedules import ScheduleSpec
from cronwire.ports.secrets import SecretBox


def alert_columns(spec: ScheduleSpec) -> list[object]:
    rules = spec.alerts
    return [rules.after_failures, rules.late_after_seconds, rules.max_duration_ms]


async def spec_columns(box: SecretBox, tenant_id: uuid.UUID, schedule_id: uuid.UUID,
                        spec: ScheduleSpec) -> list[object]:
    """name .. catchup_window_seconds in the column order schedule_insert and
    schedule_update share; the target's header values sealed."""
    target = await sealed_target(box, tenant_id, schedule_id, target_to_document(spec.target))
    # The cron column holds the schedule's timetable: its cron expression or its RFC 5545
    # rule (ADR 0058; domain.rrules.is_rrule tells them apart).
    return [spec.name, spec.timetable, spec.timezone, target,
            retry_to_document(spec.retry), spec.misfire_policy.value, spec.catchup_window_seconds]


def semantics_columns(spec: ScheduleSpec) -> list[object]:
    """run_at .. pause_after_failures, in the order both statements take them."""
    return [spec.at, spec.overlap_policy.value, spec.jitter_seconds, spec.max_runs,
            spec.pause_after_failures]


def identity_columns(spec: ScheduleSpec) -> list[object]:
    """key and managed_by (schedules as code, ADR 0057), then exclude_calendars and
    calendar_policy (ADR 0064), last in both statements."""
    return [spec.key, spec.managed_by, list(spec.exclude_calendars), spec.calendar_policy.value]
