"""The pure delivery rules the Deliverer adapters rely on: Retry-After parsing and which
outcomes are retryable (no I/O)."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from uuid import uuid4

import pytest

from cronwire.domain.delivery import (
    DeliveryRequest,
    DeliveryResult,
    Outcome,
    delivery_headers,
    new_signing_secret,
    parse_retry_after,
)
from cronwire.domain.errors import InvalidTarget

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


@pytest.mark.parametrize("value", ["a\x0bb", "a\x0cb", "a\x85b", "a\x7fb", "a\x1bb", "\r", "\n"])
def test_a_header_value_with_a_control_character_is_refused_at_delivery(value: str) -> None:
    """Schedules made before the create-time rule are still safe."""
    request = DeliveryRequest(
        run_id=uuid4(), schedule_id=uuid4(), tenant_id=uuid4(), idempotency_key="k",
        scheduled_for=datetime(2027, 1, 1, tzinfo=UTC), attempt=1, method="POST",
        url="http://127.0.0.1/", headers={"x-v": value}, body=b"",
        signing_secrets=(new_signing_secret(),), timeout_seconds=1.0)
    with pytest.raises(InvalidTarget, match="control character"):
        delivery_headers(request, 0)
    assert delivery_headers(dataclasses.replace(request, headers={"x-v": "a\tb é"}), 0)["x-v"]


OURS = "00-0123456789abcdef0123456789abcdef-0123456789abcdef-01"
TENANT_TRACE = {"TraceParent": "00-" + "a" * 32 + "-" + "b" * 16 + "-01",
                "TRACESTATE": "vendor=tenant-secret", "x-keep": "1"}


@pytest.mark.parametrize("names", [("traceparent", "tracestate"), ("TraceParent", "TraceState"),
                                   ("TRACEPARENT", "tracestate")])
def test_a_traced_attempt_carries_our_trace_context_alone(names: tuple[str, str]) -> None:
    # CONTRACT.md, "Tenant isolation in depth": a tenant's traceparent/tracestate (any
    # case) are replaced when tracing is on, never sent beside ours.
    parent, state = names
    request = DeliveryRequest(
        run_id=uuid4(), schedule_id=uuid4(), tenant_id=uuid4(), idempotency_key="k",
        scheduled_for=NOW, attempt=1, method="POST", url="http://127.0.0.1/",
        headers={parent: TENANT_TRACE["TraceParent"], state: "vendor=tenant-secret",
                 "x-keep": "1"},
        body=b"", signing_secrets=(new_signing_secret(),), timeout_seconds=1.0,
        traceparent=OURS)
    traced = delivery_headers(request, 0)
    trace_headers = {k: v for k, v in traced.items() if k.lower() in ("traceparent", "tracestate")}
    assert trace_headers == {"traceparent": OURS}
    assert traced["x-keep"] == "1"
    untraced = delivery_headers(dataclasses.replace(request, traceparent=None), 0)
    assert {k: v for k, v in untraced.items() if k.lower() in ("traceparent", "tracestate")} == {
        parent: TENANT_TRACE["TraceParent"], state: "vendor=tenant-secret"}
