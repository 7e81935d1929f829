"""Evidence rows: what one attempt looked like, cleaned to fit the attempt table.

Postgres ``text`` cannot hold NUL and the excerpt column holds at most 1 KiB of UTF-8.
The deliverer's excerpt is cut at 1 KiB of *input* bytes, but undecodable input becomes
U+FFFD (three bytes each), so the text is cut again here by its encoded size: one
malformed response must not make the batched evidence write fail for every run in it.
"""

from __future__ import annotations

from datetime import datetime

from cronwire.domain.delivery import (
    EXCERPT_BYTES,
    DeliveryRequest,
    DeliveryResult,
    Outcome,
    default_body,
    error_text,
)
from cronwire.domain.model import MAX_ATTEMPTS, AttemptRecord, ClaimedRun, RunResolution, RunStatus

ERROR_BYTES = 2048  # the deliverer already caps errors at 500 characters


def storable_text(text: str | None, max_bytes: int) -> str | None:
    """``text`` without NUL characters, cut to at most ``max_bytes`` of UTF-8 on a
    character boundary; None stays None."""
    if text is None:
        return None
    cleaned = text.replace("\x00", "")
    encoded = cleaned.encode("utf-8", errors="replace")
    if len(encoded) <= max_bytes:
        return cleaned
    return encoded[:max_bytes].decode("utf-8", errors="ignore")


def attempt_record(run: ClaimedRun, result: DeliveryResult) -> AttemptRecord:
    """The evidence row of ``run``'s current attempt (number clamped to 1..MAX_ATTEMPTS)."""
    return AttemptRecord(
        run_id=run.id,
        scheduled_for=run.scheduled_for,
        tenant_id=run.tenant_id,
        attempt=max(1, min(MAX_ATTEMPTS, run.attempt)),
        started_at=result.started_at,
        finished_at=result.finished_at,
        outcome=str(result.outcome),
        # The column is a smallint; deliverers refuse other statuses as protocol errors,
        # and one that slipped through must not make the batched evidence write fail.
        status_code=result.status_code if 100 <= (result.status_code or 0) <= 599 else None,
        error=storable_text(result.error, ERROR_BYTES),
        duration_ms=max(0, result.duration_ms),
        response_excerpt=storable_text(result.response_excerpt, EXCERPT_BYTES),
    )


def request_for(
    run: ClaimedRun, timeout_seconds: float, send_by_monotonic: float | None = None,
    traceparent: str | None = None,
) -> DeliveryRequest:
    """What this attempt of ``run`` sends: the target's body, or the default JSON body.
    A replay carries its original occurrence (``run.occurrence``), not its own instant."""
    occurrence = run.occurrence or run.scheduled_for
    body = (
        run.target.body.encode("utf-8")
        if run.target.body is not None
        else default_body(run.schedule_id, run.id, occurrence, run.attempt)
    )
    return DeliveryRequest(
        run_id=run.id,
        schedule_id=run.schedule_id,
        tenant_id=run.tenant_id,
        idempotency_key=run.idempotency_key,
        scheduled_for=occurrence,
        attempt=run.attempt,
        method=run.target.method,
        url=run.target.url,
        headers=run.target.headers,
        body=body,
        signing_secrets=run.signing_secrets,
        timeout_seconds=timeout_seconds,
        send_by_monotonic=send_by_monotonic,
        traceparent=traceparent,
        client_tls=run.target.tls,
    )


def internal_failure(
    exc: BaseException, started_at: datetime, finished_at: datetime
) -> DeliveryResult:
    """The result recorded when the deliverer itself broke (it must never raise): a
    retryable failure with evidence, so the run is neither lost nor stuck leased."""
    return DeliveryResult(
        outcome=Outcome.CONNECTION_ERROR,
        status_code=None,
        error=error_text(exc, f"deliverer failed: {exc}"),
        duration_ms=max(0, round((finished_at - started_at).total_seconds() * 1000)),
        response_excerpt=None,
        retry_after_seconds=None,
        started_at=started_at,
        finished_at=finished_at,
    )


SUPERSEDED_ABORT = ("Cancelled: superseded by a newer occurrence (overlap_policy "
                    "cancel_other); the request in flight was aborted (connection closed)")


def aborted_as_superseded(
    run: ClaimedRun, started_at: datetime, finished_at: datetime
) -> RunResolution:
    """The write that ends an attempt aborted because a newer occurrence of its
    cancel_other schedule started: cancelled, with the attempt recorded as a connection
    the executor closed before any complete answer. Never retried."""
    result = DeliveryResult(
        outcome=Outcome.CONNECTION_ERROR, status_code=None, error=SUPERSEDED_ABORT,
        duration_ms=max(0, round((finished_at - started_at).total_seconds() * 1000)),
        response_excerpt=None, retry_after_seconds=None,
        started_at=started_at, finished_at=finished_at,
    )
    record = attempt_record(run, result)
    return RunResolution(
        run_id=run.id, scheduled_for=run.scheduled_for, status=RunStatus.CANCELLED,
        attempt_count=max(1, min(MAX_ATTEMPTS, run.attempt)), retry_delay_seconds=None,
        last_status_code=None, last_error=SUPERSEDED_ABORT, attempt=record,
        lease_generation=run.lease_generation,
    )
