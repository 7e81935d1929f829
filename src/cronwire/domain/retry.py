"""Retry policy maths and the decision that ends one attempt (pure: the caller passes rng).

Backoff is exponential with *full jitter* (a uniform draw between 0 and the exponential
ceiling), so retries of many runs failing together spread out instead of arriving at the
target in synchronised waves. A ``Retry-After`` on a 429 or 503 answer is a floor the
receiver asked for; it is honoured up to ``hold_cap`` (the policy's cap, and never more
than an hour) so one hostile answer cannot park a run, or a flow-control key shared by a
tenant's schedules, for longer. On any other status it is ignored.
"""

from __future__ import annotations

import random
from typing import Protocol

from cronwire.domain.attempts import attempt_record
from cronwire.domain.delivery import DeliveryResult, Outcome
from cronwire.domain.model import MAX_ATTEMPTS, ClaimedRun, RetryPolicy, RunResolution, RunStatus


class Uniform(Protocol):
    """The slice of :class:`random.Random` this module needs (seeded in tests)."""

    def uniform(self, a: float, b: float) -> float: ...


def clamp_attempts(value: int) -> int:
    """Attempt numbers and ``max_attempts`` live in 1..MAX_ATTEMPTS (the evidence ceiling)."""
    return max(1, min(MAX_ATTEMPTS, value))


def backoff_ceiling(policy: RetryPolicy, attempt: int) -> float:
    """The largest delay after failed attempt number ``attempt`` (1-based), before jitter."""
    cap = max(0.0, policy.max_backoff_seconds)
    initial = max(0.0, policy.initial_backoff_seconds)
    exponent = clamp_attempts(attempt) - 1
    return min(cap, initial * (2.0**exponent))


# The longest a receiver's Retry-After may hold a retry or a flow-control key, whatever
# the policy's cap: a receiver that answers "Retry-After: 999999999999" gets an hour.
MAX_RETRY_AFTER_SECONDS = 3600.0


def hold_cap(policy: RetryPolicy) -> float:
    """The longest a Retry-After may hold this policy's runs and their flow-control key:
    ``min(max_backoff_seconds, MAX_RETRY_AFTER_SECONDS)``."""
    return min(max(0.0, policy.max_backoff_seconds), MAX_RETRY_AFTER_SECONDS)


def capped_retry_after(policy: RetryPolicy, retry_after: float | None) -> float | None:
    """The receiver's Retry-After as far as it is honoured (None when it asked nothing)."""
    if retry_after is None:
        return None
    return min(max(0.0, retry_after), hold_cap(policy))


def next_delay(
    policy: RetryPolicy,
    attempt: int,
    retry_after: float | None = None,
    rng: Uniform | None = None,
) -> float:
    """Seconds to wait before the attempt after ``attempt``: full jitter under the
    exponential ceiling, raised to ``retry_after`` (up to ``hold_cap``) when the receiver
    asked for more, never above ``max_backoff_seconds``."""
    draw = (rng or random).uniform(0.0, backoff_ceiling(policy, attempt))
    cap = max(0.0, policy.max_backoff_seconds)
    asked = capped_retry_after(policy, retry_after)
    if asked is not None and asked > draw:
        draw = asked
    return min(draw, cap)


# The answers whose Retry-After is a request to wait (RFC 9110: 503; RFC 6585: 429). On
# any other status the header is noise, and a hostile or misconfigured receiver must not
# be able to stretch our backoff with it.
RETRY_AFTER_STATUSES = frozenset({429, 503})


def honoured_retry_after(result: DeliveryResult) -> float | None:
    """The receiver's ``Retry-After`` in seconds, when its status gives it meaning."""
    if result.status_code in RETRY_AFTER_STATUSES:
        return result.retry_after_seconds
    return None


def resolve_attempt(
    run: ClaimedRun, result: DeliveryResult, rng: Uniform | None = None
) -> RunResolution:
    """The write that ends this attempt: succeeded, failed for good, or retrying later.

    A failure is final when it is not retryable (a 4xx other than 408/425/429, a redirect,
    a refused address) or when this was the last attempt the policy allows.
    """
    attempt = clamp_attempts(run.attempt)
    record = attempt_record(run, result)
    if result.outcome is Outcome.SUCCESS:
        status = RunStatus.SUCCEEDED
    elif result.retryable and attempt < clamp_attempts(run.retry.max_attempts):
        status = RunStatus.RETRYING
    else:
        status = RunStatus.FAILED
    delay = (
        next_delay(run.retry, attempt, honoured_retry_after(result), rng)
        if status is RunStatus.RETRYING
        else None
    )
    return RunResolution(
        run_id=run.id,
        scheduled_for=run.scheduled_for,
        status=status,
        attempt_count=attempt,
        retry_delay_seconds=delay,
        last_status_code=result.status_code,
        last_error=record.error,
        attempt=record,
        lease_generation=run.lease_generation,
        hold_seconds=None if status is RunStatus.SUCCEEDED
        else capped_retry_after(run.retry, honoured_retry_after(result)),
    )
