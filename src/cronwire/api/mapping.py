"""The API's schema <-> domain mapping, one function per direction and concept.

Requests become domain objects here (``spec_from``), domain objects become response
bodies here (``schedule_out``, ``run_out``, ``run_detail_out``); the routers call nothing
else to translate. (A PATCH body is merged onto the current spec by ``merge_patch``.)
"""

from __future__ import annotations

from typing import Any

from cronwire.api.schemas_flow import FlowControlIn
from cronwire.api.schemas_schedule_input import (
    AlertsIn,
    ClientTlsIn,
    RetryIn,
    ScheduleCreate,
    TargetIn,
)
from cronwire.domain.alerts import AlertRules
from cronwire.domain.calendars import parse_calendar_policy
from cronwire.domain.client_tls import ClientTls, client_tls_from_pem
from cronwire.domain.documents import retry_to_document, target_to_document
from cronwire.domain.flow_control import FlowControl, effective_key
from cronwire.domain.history import RunDetail, RunView
from cronwire.domain.model import RetryPolicy, ScheduleStatus, Target
from cronwire.domain.schedule_rules import parse_misfire_policy, parse_overlap_policy
from cronwire.domain.schedules import ScheduleRecord, ScheduleSpec
from cronwire.domain.secrets import MASK


def target_from(given: TargetIn) -> Target:
    return Target(url=given.url, method=given.method, headers=dict(given.headers),
                  body=given.body, tls=tls_from(given.tls))


def tls_from(given: ClientTlsIn | None) -> ClientTls | None:
    """The certificate and key parsed and matched (a 422 naming the field otherwise)."""
    if given is None:
        return None
    return client_tls_from_pem(given.client_certificate, given.client_key)


def tls_out(tls: ClientTls | None) -> dict[str, Any] | None:
    if tls is None:
        return None
    return {"client_certificate_subject": tls.subject,
            "client_certificate_not_after": tls.not_after}


def retry_from(given: RetryIn) -> RetryPolicy:
    return RetryPolicy(given.max_attempts, given.initial_backoff_seconds,
                       given.max_backoff_seconds)


def alerts_from(given: AlertsIn | None) -> AlertRules:
    if given is None:
        return AlertRules()
    return AlertRules(given.after_failures, given.late_after_seconds, given.max_duration_ms)


def alerts_out(rules: AlertRules) -> dict[str, Any]:
    return {"after_failures": rules.after_failures,
            "late_after_seconds": rules.late_after_seconds,
            "max_duration_ms": rules.max_duration_ms}


def flow_from(given: FlowControlIn | None) -> FlowControl | None:
    if given is None:
        return None
    rate = given.rate_per_second
    return FlowControl(key=given.key, max_concurrency=given.max_concurrency,
                       rate_per_second=None if rate is None else float(rate), burst=given.burst)


def flow_out(spec: ScheduleSpec) -> dict[str, Any] | None:
    """The schedule's flow_control with the key its runs count under filled in."""
    flow = spec.flow_control
    if flow is None:
        return None
    return {"key": effective_key(flow, spec.target.url), "max_concurrency": flow.max_concurrency,
            "rate_per_second": flow.rate_per_second, "burst": flow.burst}


def spec_from(body: ScheduleCreate) -> ScheduleSpec:
    return ScheduleSpec(
        name=body.name, cron=body.cron, rrule=body.rrule, timezone=body.timezone, target=target_from(body.target),
        retry=retry_from(body.retry), misfire_policy=parse_misfire_policy(body.misfire_policy),
        catchup_window_seconds=body.catchup_window_seconds, starts_at=body.starts_at,
        ends_at=body.ends_at, at=body.at,
        overlap_policy=parse_overlap_policy(body.overlap_policy),
        jitter_seconds=body.jitter_seconds, max_runs=body.max_runs,
        pause_after_failures=body.pause_after_failures, alerts=alerts_from(body.alerts),
        flow_control=flow_from(body.flow_control), key=body.key, managed_by=body.managed_by,
        exclude_calendars=tuple(body.exclude_calendars),
        calendar_policy=parse_calendar_policy(body.calendar_policy),
    )


def masked_target(target: Target) -> dict[str, Any]:
    """A target as reads show it: every header value is a credential as far as we know,
    so each reads as MASK (a PATCH sending MASK back keeps the stored value)."""
    document = target_to_document(target)
    document["headers"] = dict.fromkeys(target.headers, MASK)
    document["tls"] = tls_out(target.tls)  # write-only: the subject and expiry, no PEM
    return document


def schedule_out(record: ScheduleRecord) -> dict[str, Any]:
    spec = record.spec
    return {
        "id": record.id, "tenant_id": record.tenant_id, "name": spec.name, "cron": spec.cron,
        "rrule": spec.rrule, "at": spec.at, "timezone": spec.timezone,
        "target": masked_target(spec.target),
        "retry": retry_to_document(spec.retry),
        "misfire_policy": spec.misfire_policy.value,
        "catchup_window_seconds": spec.catchup_window_seconds,
        "overlap_policy": spec.overlap_policy.value, "jitter_seconds": spec.jitter_seconds,
        "max_runs": spec.max_runs, "pause_after_failures": spec.pause_after_failures,
        "flow_control": flow_out(spec),
        "status": record.status.value, "paused": record.status is ScheduleStatus.PAUSED,
        "paused_reason": record.paused_reason, "paused_at": record.paused_at,
        "runs_planned": record.runs_planned,
        "consecutive_failures": record.consecutive_failures,
        "starts_at": spec.starts_at, "ends_at": spec.ends_at,
        "next_fire_at": record.next_fire_at, "last_fire_at": record.last_fire_at,
        "previous_secret_expires_at": record.previous_secret_expires_at,
        "created_at": record.created_at, "updated_at": record.updated_at,
        "alerts": alerts_out(spec.alerts), "version": record.version,
        "key": spec.key, "managed_by": spec.managed_by,
        "exclude_calendars": list(spec.exclude_calendars),
        "calendar_policy": spec.calendar_policy.value,
    }


def run_out(run: RunView) -> dict[str, Any]:
    return {
        "id": run.id, "schedule_id": run.schedule_id, "scheduled_for": run.scheduled_for,
        "status": run.status.value, "attempt_count": run.attempt_count,
        "fire_after": run.fire_after, "first_attempt_at": run.first_attempt_at,
        "finished_at": run.finished_at, "last_status_code": run.last_status_code,
        "last_error": run.last_error, "trigger": run.trigger.value,
        "skip_reason": run.skip_reason.value if run.skip_reason else None,
        "replay_of": run.replay_of, "replayed_by": run.replayed_by,
    }


def run_detail_out(detail: RunDetail) -> dict[str, Any]:
    attempts = [
        {"attempt": a.attempt, "started_at": a.started_at, "finished_at": a.finished_at,
         "outcome": a.outcome, "status_code": a.status_code, "error": a.error,
         "duration_ms": a.duration_ms, "response_excerpt": a.response_excerpt}
        for a in detail.attempts
    ]
    return {**run_out(detail.run), "attempts": attempts}
