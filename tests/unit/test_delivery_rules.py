"""The pure delivery rules the Deliverer adapters rely on: Retry-After parsing and which
outcomes are retryable (no I/O)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from cronwire.domain.delivery import DeliveryResult, Outcome, parse_retry_after

NOW = datetime(2027, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("7", 7.0),
        (" 120 ", 120.0),
        ("0", 0.0),
        ("-5", 0.0),
        ("1.5", 1.5),
        ("Fri, 01 Jan 2027 00:00:30 GMT", 30.0),
        ("Thu, 31 Dec 2026 23:00:00 GMT", 0.0),
        ("soon", None),
        ("", None),
        (None, None),
        ("7 seconds", None),
    ],
)
def test_parse_retry_after(value: str | None, seconds: float | None) -> None:
    assert parse_retry_after(value, NOW) == seconds


@pytest.mark.parametrize(
    ("outcome", "status", "retryable"),
    [
        (Outcome.SUCCESS, 200, False),
        (Outcome.TIMEOUT, None, True),
        (Outcome.CONNECTION_ERROR, None, True),
        (Outcome.BLOCKED, None, False),
        (Outcome.HTTP_ERROR, 301, False),
        (Outcome.HTTP_ERROR, 599, True),
    ],
)
def test_retryable(outcome: Outcome, status: int | None, retryable: bool) -> None:
    result = DeliveryResult(outcome, status, None, 1, None, None, NOW, NOW + timedelta(seconds=1))
    assert result.retryable is retryable
