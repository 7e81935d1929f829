"""Circuit-breaker transitions and target keys (pure)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from cronwire.domain.breaker import (
    CLOSED,
    Admission,
    BreakerPolicy,
    BreakerState,
    BreakerStatus,
    admission,
    after_outcomes,
    health_signal,
    target_key,
)
from cronwire.domain.delivery import DeliveryResult, Outcome

NOW = datetime(2027, 1, 1, tzinfo=UTC)
POLICY = BreakerPolicy(failure_threshold=3, cooldown_seconds=30)


@pytest.mark.parametrize(("url", "key"), [
    ("https://Example.COM/a?b=1", "https://example.com:443"),
    ("https://example.com:443/other", "https://example.com:443"),
    ("http://example.com/x", "http://example.com:80"),
    ("http://example.com:8080/x", "http://example.com:8080"),
    ("http://[::1]:9000/x", "http://[::1]:9000"),
    ("HTTP://127.0.0.1/", "http://127.0.0.1:80"),
])
def test_the_key_is_the_origin_with_default_ports_written_out(url: str, key: str) -> None:
    assert target_key(url) == key


def test_a_malformed_port_still_gives_a_stable_key() -> None:
    assert target_key("http://example.com:99999/x") == target_key("http://example.com:99999/x")


def test_consecutive_failures_open_the_breaker_at_the_threshold() -> None:
    two = after_outcomes(CLOSED, [False, False], NOW, POLICY)
    assert two.status is BreakerStatus.CLOSED and two.failures == 2
    three = after_outcomes(two, [False], NOW, POLICY)
    assert three.status is BreakerStatus.OPEN
    assert three.opened_until == NOW + timedelta(seconds=30)


def test_a_success_resets_the_count() -> None:
    state = after_outcomes(CLOSED, [False, False, True, False, False], NOW, POLICY)
    assert state.status is BreakerStatus.CLOSED and state.failures == 2


def test_stragglers_failing_while_open_do_not_extend_the_cool_down() -> None:
    opened = after_outcomes(CLOSED, [False] * 3, NOW, POLICY)
    later = after_outcomes(opened, [False], NOW + timedelta(seconds=10), POLICY)
    assert later.status is BreakerStatus.OPEN and later.opened_until == opened.opened_until


def test_the_probe_closes_or_reopens() -> None:
    half = BreakerState(BreakerStatus.HALF_OPEN, failures=3, probe_by="r1",
                        probe_expires_at=NOW + timedelta(seconds=5))
    assert after_outcomes(half, [True], NOW, POLICY) == CLOSED
    reopened = after_outcomes(half, [False], NOW, POLICY)
    assert reopened.status is BreakerStatus.OPEN and reopened.probe_by is None
    assert reopened.opened_until == NOW + timedelta(seconds=30)


def test_admission_per_state() -> None:
    until = NOW + timedelta(seconds=5)
    assert admission(CLOSED, NOW) == (Admission.DELIVER, None)
    assert admission(BreakerState(BreakerStatus.OPEN, 3, until), NOW) == (Admission.DEFER, until)
    assert admission(BreakerState(BreakerStatus.OPEN, 3, NOW), NOW) == (Admission.TRY_PROBE, None)
    probing = BreakerState(BreakerStatus.HALF_OPEN, 3, None, "r1", until)
    assert admission(probing, NOW) == (Admission.DEFER, until)
    vanished = BreakerState(BreakerStatus.HALF_OPEN, 3, None, "r1", NOW - timedelta(seconds=1))
    assert admission(vanished, NOW) == (Admission.TRY_PROBE, None)


def _result(outcome: Outcome, status: int | None = None) -> DeliveryResult:
    return DeliveryResult(outcome, status, None, 1, None, None, NOW, NOW)


@pytest.mark.parametrize(("result", "healthy"), [
    (_result(Outcome.SUCCESS, 200), True),
    (_result(Outcome.HTTP_ERROR, 404), True),  # the target is up; the request is wrong
    (_result(Outcome.HTTP_ERROR, 503), False),
    (_result(Outcome.HTTP_ERROR, 429), False),
    (_result(Outcome.TIMEOUT), False),
    (_result(Outcome.CONNECTION_ERROR), False),
    (_result(Outcome.BLOCKED), None),  # never reached the target
])
def test_which_outcomes_say_something_about_the_target(
    result: DeliveryResult, healthy: bool | None
) -> None:
    assert health_signal(result) is healthy
