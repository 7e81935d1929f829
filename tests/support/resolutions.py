"""What the executor would write for one attempt of a claimed run: a RunResolution with its
evidence, for tests that drive the RunStore (and what sits on it) by hand."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from cronwire.domain.model import AttemptRecord, ClaimedRun, RunResolution, RunStatus


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
