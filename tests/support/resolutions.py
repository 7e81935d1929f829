"""What the executor would write for one attempt of a claimed run: a RunResolution with its
evidence, for tests that drive the RunStore (and what sits on it) by hand."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from cronwire.domain.delivery import DeliveryResult, Outcome, parse_retry_after
from cronwire.domain.model import AttemptRecord, ClaimedRun, RunResolution, RunStatus
from cronwire.domain.retry import resolve_attempt


def resolution(
    run: ClaimedRun, status: RunStatus, *, delay: float | None = None, excerpt: str | None = "ok",
    error: str | None = None,
) -> RunResolution:
    """What the executor would write for one attempt of ``run`` ending in ``status``."""
    now = datetime.now(UTC)
    attempt = AttemptRecord(
        run_id=run.id, scheduled_for=run.scheduled_for, tenant_id=run.tenant_id,
        attempt=run.attempt, started_at=now, finished_at=now + timedelta(milliseconds=5),
        outcome="success" if status is RunStatus.SUCCEEDED else "http_error",
        status_code=200 if status is RunStatus.SUCCEEDED else 503, error=None,
        duration_ms=5, response_excerpt=excerpt,
    )
    return RunResolution(
        run_id=run.id, scheduled_for=run.scheduled_for, status=status,
        attempt_count=run.attempt, retry_delay_seconds=delay,
        last_status_code=attempt.status_code, last_error=error, attempt=attempt,
        lease_generation=run.lease_generation,
    )


def throttled(run: ClaimedRun, retry_after: str) -> RunResolution:
    """What the executor writes when ``run``'s receiver answers 429 with ``retry_after``
    (the domain's own decision, so its caps apply)."""
    now = datetime.now(UTC)
    answer = DeliveryResult(outcome=Outcome.HTTP_ERROR, status_code=429,
                            error="HTTPError: 429", duration_ms=1, response_excerpt=None,
                            retry_after_seconds=parse_retry_after(retry_after, now),
                            started_at=now, finished_at=now)
    return resolve_attempt(run, answer)
