"""Retry maths and the attempt decision (pure)."""

from __future__ import annotations

import random
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from cronwire.domain.attempts import attempt_record, request_for, storable_text
from cronwire.domain.delivery import DeliveryResult, Outcome
from cronwire.domain.model import ClaimedRun, RetryPolicy, RunStatus, Target, Trigger
from cronwire.domain.retry import backoff_ceiling, clamp_attempts, next_delay, resolve_attempt

POLICY = RetryPolicy(max_attempts=5, initial_backoff_seconds=10, max_backoff_seconds=60)
NOW = datetime(2027, 1, 1, tzinfo=UTC)


def _run(attempt: int = 1, policy: RetryPolicy = POLICY, body: str | None = None) -> ClaimedRun:
    return ClaimedRun(
        id=uuid.uuid4(), tenant_id=uuid.uuid4(), schedule_id=uuid.uuid4(),
        scheduled_for=NOW, idempotency_key="msg_x", trigger=Trigger.SCHEDULE, attempt=attempt,
        target=Target("https://example.com/hook", body=body), retry=policy,
        signing_secrets=("whsec_AAAA",), lease_expires_at=NOW,
    )


def _result(outcome: Outcome, status: int | None = None, **kw: object) -> DeliveryResult:
    values: dict[str, object] = dict(
        outcome=outcome, status_code=status, error=None if outcome is Outcome.SUCCESS else "E: x",
        duration_ms=12, response_excerpt=None, retry_after_seconds=None,
        started_at=NOW, finished_at=NOW + timedelta(milliseconds=12),
    )
    values.update(kw)
    return DeliveryResult(**values)  # type: ignore[arg-type]


@pytest.mark.parametrize(("attempt", "ceiling"), [(1, 10), (2, 20), (3, 40), (4, 60), (8, 60)])
def test_the_ceiling_doubles_per_attempt_up_to_the_cap(attempt: int, ceiling: float) -> None:
    assert backoff_ceiling(POLICY, attempt) == ceiling


def test_full_jitter_spreads_delays_over_the_whole_range() -> None:
    rng = random.Random(7)
    delays = [next_delay(POLICY, 3, None, rng) for _ in range(2000)]
    assert all(0 <= d <= 40 for d in delays)
    assert min(delays) < 1 and max(delays) > 39  # not "ceiling +- a little"
    assert 15 < sum(delays) / len(delays) < 25  # uniform: mean near half the ceiling


def test_retry_after_is_a_floor_but_never_beyond_the_cap() -> None:
    rng = random.Random(1)
    assert all(next_delay(POLICY, 1, 30, rng) >= 30 for _ in range(200))
    assert next_delay(POLICY, 1, 86_400, rng) == 60


def test_attempts_clamp_to_the_evidence_ceiling() -> None:
    assert [clamp_attempts(n) for n in (-3, 0, 1, 8, 9, 100)] == [1, 1, 1, 8, 8, 8]


def test_success_ends_the_run() -> None:
    resolution = resolve_attempt(_run(), _result(Outcome.SUCCESS, 204))
    assert resolution.status is RunStatus.SUCCEEDED and resolution.retry_delay_seconds is None
    assert resolution.attempt is not None and resolution.attempt.outcome == "success"


@pytest.mark.parametrize(("outcome", "status"), [
    (Outcome.HTTP_ERROR, 500), (Outcome.HTTP_ERROR, 429), (Outcome.HTTP_ERROR, 408),
    (Outcome.TIMEOUT, None), (Outcome.CONNECTION_ERROR, None),
])
def test_retryable_failures_retry_until_the_last_attempt(outcome: Outcome, status: int | None) -> None:
    early = resolve_attempt(_run(attempt=4), _result(outcome, status), random.Random(3))
    assert early.status is RunStatus.RETRYING
    assert early.retry_delay_seconds is not None and 0 <= early.retry_delay_seconds <= 60
    last = resolve_attempt(_run(attempt=5), _result(outcome, status))
    assert last.status is RunStatus.FAILED and last.retry_delay_seconds is None


@pytest.mark.parametrize(("outcome", "status"), [
    (Outcome.HTTP_ERROR, 404), (Outcome.HTTP_ERROR, 301), (Outcome.BLOCKED, None),
])
def test_permanent_failures_are_not_retried(outcome: Outcome, status: int | None) -> None:
    assert resolve_attempt(_run(), _result(outcome, status)).status is RunStatus.FAILED


def test_an_attempt_past_a_shrunken_policy_is_final_and_numbers_are_clamped() -> None:
    run = _run(attempt=9, policy=RetryPolicy(max_attempts=2))
    resolution = resolve_attempt(run, _result(Outcome.HTTP_ERROR, 503))
    assert resolution.status is RunStatus.FAILED
    assert resolution.attempt_count == 8 and resolution.attempt is not None
    assert resolution.attempt.attempt == 8


@pytest.mark.parametrize("status", [429, 503])
def test_the_retry_after_answer_reaches_the_delay(status: int) -> None:
    result = _result(Outcome.HTTP_ERROR, status, retry_after_seconds=45.0)
    resolution = resolve_attempt(_run(), result, random.Random(0))
    assert resolution.retry_delay_seconds == 45.0


@pytest.mark.parametrize("status", [500, 502, 504, 408, 425])
def test_retry_after_is_ignored_on_any_other_status(status: int) -> None:
    """Only 429 and 503 give Retry-After a meaning (CONTRACT.md): on a 500 it must not
    stretch the backoff beyond the jittered ceiling (10 s for attempt 1 here)."""
    result = _result(Outcome.HTTP_ERROR, status, retry_after_seconds=45.0)
    delays = [resolve_attempt(_run(), result, random.Random(seed)).retry_delay_seconds
              for seed in range(50)]
    assert all(d is not None and 0 <= d <= 10 for d in delays)


def test_the_resolution_names_the_lease_it_ends() -> None:
    run = _run()
    run = ClaimedRun(**{**{f: getattr(run, f) for f in run.__slots__}, "lease_generation": 7})
    assert resolve_attempt(run, _result(Outcome.SUCCESS, 200)).lease_generation == 7


def test_evidence_text_fits_the_attempt_table() -> None:
    mangled = "\ufffd" * 1024  # what 1 KiB of undecodable bytes becomes: 3 KiB of UTF-8
    record = attempt_record(
        _run(), _result(Outcome.HTTP_ERROR, 500, response_excerpt=mangled, error="E: a\x00b"))
    assert record.response_excerpt is not None
    assert len(record.response_excerpt.encode()) <= 1024
    assert record.error == "E: ab"
    assert storable_text("é" * 600, 1024) == "é" * 512  # cut on a character boundary
    assert storable_text(None, 10) is None


def test_the_request_carries_the_target_body_or_the_default_json() -> None:
    assert request_for(_run(body="custom"), 5).body == b"custom"
    default = request_for(_run(attempt=2), 5)
    assert b'"attempt":2' in default.body and default.timeout_seconds == 5
    assert default.idempotency_key == "msg_x"


@pytest.mark.parametrize(("status", "stored"), [(200, 200), (599, 599), (100, 100),
                                                (40000, None), (99, None), (600, None)])
def test_a_status_the_attempt_table_cannot_hold_is_not_stored(status: int,
                                                              stored: int | None) -> None:
    """HTTP/1.1 40000 once overflowed the smallint column and the batched
    evidence write lost every attempt of the batch."""
    assert attempt_record(_run(), _result(Outcome.HTTP_ERROR, status)).status_code == stored


def test_the_request_carries_the_runs_tenant() -> None:
    run = _run()
    assert request_for(run, 5).tenant_id == run.tenant_id
