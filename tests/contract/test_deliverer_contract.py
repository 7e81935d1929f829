"""The Deliverer contract, run against every adapter with a real HTTP sink on 127.0.0.1.

An autouse jail on the event loop refuses (and fails the test for) any
connection to a non-loopback address, so a broken adapter cannot reach the
network even while a test is trying to make it misbehave.
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator
from ipaddress import ip_address
from typing import Any
from uuid import UUID, uuid4

import pytest

from cronwire.adapters.http.guard import TargetGuard
from cronwire.domain.delivery import Outcome, default_body, new_signing_secret
from tests.support.deliverer_sink import (  # noqa: F401 - deliverer_fixture
    ADAPTERS,
    NEW_SECRET,
    SCHEDULED_FOR,
    SECRET,
    Deliverer,
    Sink,
    deliverer_fixture,
    make_request,
    verify,
)


@pytest.fixture(autouse=True)
async def loopback_only(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[list[Any]]:
    loop = asyncio.get_running_loop()
    refused: list[Any] = []
    original = loop.sock_connect

    async def sock_connect(sock: socket.socket, address: Any) -> None:
        if not ip_address(str(address[0]).split("%")[0]).is_loopback:
            refused.append(address)
            raise ConnectionRefusedError(f"test jail: {address} is not loopback")
        await original(sock, address)

    monkeypatch.setattr(loop, "sock_connect", sock_connect)
    yield refused
    assert refused == [], "an adapter tried to leave loopback"


@pytest.fixture
async def sink() -> AsyncIterator[Sink]:
    server = Sink()
    await server.start()
    yield server
    await server.close()



async def test_sends_the_exact_request(deliverer: Deliverer, sink: Sink) -> None:
    tenant_headers = {
        "X-Custom": "1",
        "Webhook-Id": "spoofed",
        "content-type": "text/plain",
        "Host": "elsewhere.example",
        "X-CRONWIRE-ATTEMPT": "99",
    }
    req = make_request(
        sink.url("/hooks/nightly?x=1&y=two"),
        method="PUT",
        headers=tenant_headers,
        body=b"raw \x00 bytes",
        attempt=3,
    )
    result = await deliverer.deliver(req)
    assert (result.outcome, result.status_code, result.error) == (Outcome.SUCCESS, 200, None)
    assert result.response_excerpt == "ok" and result.retryable is False
    assert result.started_at <= result.finished_at and result.duration_ms >= 0
    [got] = sink.requests
    assert (got.method, got.path_qs, got.body) == (
        "PUT",
        "/hooks/nightly?x=1&y=two",
        b"raw \x00 bytes",
    )
    expected = {
        "x-custom": "1",
        "content-type": "text/plain",
        "host": f"127.0.0.1:{sink.port}",
        "webhook-id": req.idempotency_key,
        "webhook-timestamp": str(int(result.started_at.timestamp())),
        "x-cronwire-run-id": str(req.run_id),
        "x-cronwire-schedule-id": str(req.schedule_id),
        "x-cronwire-scheduled-for": "2027-03-28T01:00:00Z",
        "x-cronwire-attempt": "3",
    }
    for name, value in expected.items():
        assert got.headers.getall(name) == [value], name
    assert got.headers["user-agent"].startswith("cronwire/")


async def test_a_tenants_trace_context_is_replaced_only_when_traced(
        deliverer: Deliverer, sink: Sink) -> None:
    # CONTRACT.md, "Tenant isolation in depth": with tracing on, the receiver sees our
    # traceparent alone (no tenant tracestate beside it); with tracing off, the tenant's.
    ours = "00-0123456789abcdef0123456789abcdef-0123456789abcdef-01"
    theirs = {"TraceParent": "00-" + "a" * 32 + "-" + "b" * 16 + "-00",
              "tracestate": "vendor=tenant-value"}
    for traceparent in (ours, None):
        req = make_request(sink.url("/hook"), headers=theirs, traceparent=traceparent)
        assert (await deliverer.deliver(req)).outcome is Outcome.SUCCESS
    traced, untraced = sink.requests
    assert traced.headers.getall("traceparent") == [ours]
    assert "tracestate" not in traced.headers
    assert untraced.headers.getall("traceparent") == [theirs["TraceParent"]]
    assert untraced.headers.getall("tracestate") == ["vendor=tenant-value"]


async def test_default_body_is_json_describing_the_run(deliverer: Deliverer, sink: Sink) -> None:
    run_id, schedule_id = uuid4(), uuid4()
    body = default_body(schedule_id, run_id, SCHEDULED_FOR, 2)
    req = make_request(
        sink.url("/hook"), run_id=run_id, schedule_id=schedule_id, attempt=2, body=body
    )
    assert (await deliverer.deliver(req)).outcome is Outcome.SUCCESS
    [got] = sink.requests
    assert got.headers["content-type"] == "application/json"
    assert json.loads(got.body) == {
        "schedule_id": str(schedule_id),
        "run_id": str(run_id),
        "scheduled_for": "2027-03-28T01:00:00Z",
        "attempt": 2,
    }
    verify(SECRET, got)


async def test_signature_verifies_with_each_secret_during_rotation(
    deliverer: Deliverer, sink: Sink
) -> None:
    req = make_request(sink.url("/hook"), signing_secrets=(SECRET, NEW_SECRET))
    assert (await deliverer.deliver(req)).outcome is Outcome.SUCCESS
    [got] = sink.requests
    assert len(got.headers["webhook-signature"].split(" ")) == 2
    verify(SECRET, got)
    verify(NEW_SECRET, got)
    with pytest.raises(Exception, match="signature"):
        verify(new_signing_secret(), got)


async def test_webhook_id_is_stable_and_timestamp_is_per_attempt(
    deliverer: Deliverer, sink: Sink
) -> None:
    results = [await deliverer.deliver(make_request(sink.url("/hook"), attempt=n)) for n in (1, 2)]
    first, second = sink.requests
    assert (
        first.headers["webhook-id"]
        == second.headers["webhook-id"]
        == "run-" + str(UUID("00000000-0000-4000-8000-000000000001"))
    )
    for got, result in zip(sink.requests, results, strict=True):
        assert got.headers["webhook-timestamp"] == str(int(result.started_at.timestamp()))
        verify(SECRET, got)
    assert [got.headers["x-cronwire-attempt"] for got in sink.requests] == ["1", "2"]


@pytest.mark.parametrize("status", [200, 201, 202, 204])
async def test_any_2xx_is_success(deliverer: Deliverer, sink: Sink, status: int) -> None:
    result = await deliverer.deliver(make_request(sink.url(f"/status/{status}")))
    assert (result.outcome, result.status_code, result.retryable) == (
        Outcome.SUCCESS,
        status,
        False,
    )


@pytest.mark.parametrize(
    ("status", "retryable"),
    [
        (500, True),
        (503, True),
        (429, True),
        (408, True),
        (425, True),
        (404, False),
        (400, False),
        (401, False),
        (410, False),
    ],
)
async def test_http_errors_and_whether_they_retry(
    deliverer: Deliverer, sink: Sink, status: int, retryable: bool
) -> None:
    result = await deliverer.deliver(make_request(sink.url(f"/status/{status}")))
    assert (result.outcome, result.status_code) == (Outcome.HTTP_ERROR, status)
    assert result.retryable is retryable
    assert result.error is not None and str(status) in result.error
    assert result.response_excerpt == f"status {status}"


@pytest.mark.parametrize("internal", ["loopback-sink", "http://169.254.169.254/latest/meta-data/"])
async def test_redirects_are_not_followed(deliverer: Deliverer, sink: Sink, internal: str) -> None:
    internal_host = Sink()
    await internal_host.start()
    try:
        to = internal_host.url("/internal") if internal == "loopback-sink" else internal
        result = await deliverer.deliver(make_request(sink.url(f"/redirect?to={to}")))
        assert (result.outcome, result.status_code, result.retryable) == (
            Outcome.HTTP_ERROR,
            302,
            False,
        )
        assert result.error is not None and "not followed" in result.error
        assert len(sink.requests) == 1
        assert internal_host.requests == []
    finally:
        await internal_host.close()


async def test_slow_receiver_times_out(deliverer: Deliverer, sink: Sink) -> None:
    result = await deliverer.deliver(make_request(sink.url("/slow"), timeout_seconds=0.3))
    assert (result.outcome, result.status_code, result.retryable) == (Outcome.TIMEOUT, None, True)
    assert result.error is not None and result.error.startswith(("TimeoutError", "ReadTimeout"))
    assert 250 <= result.duration_ms < 3000


async def test_closed_port_is_a_connection_error(deliverer: Deliverer) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    result = await deliverer.deliver(make_request(f"http://127.0.0.1:{port}/hook"))
    assert (result.outcome, result.status_code, result.retryable) == (
        Outcome.CONNECTION_ERROR,
        None,
        True,
    )
    assert result.error is not None and ": " in result.error and len(result.error) <= 500


async def test_retry_after_is_reported(deliverer: Deliverer, sink: Sink) -> None:
    result = await deliverer.deliver(make_request(sink.url("/retry-after")))
    assert (result.outcome, result.status_code, result.retryable) == (Outcome.HTTP_ERROR, 429, True)
    assert result.retry_after_seconds == 7


async def test_response_excerpt_is_capped_on_a_character_boundary(
    deliverer: Deliverer, sink: Sink
) -> None:
    result = await deliverer.deliver(make_request(sink.url("/big")))
    assert result.outcome is Outcome.SUCCESS
    assert result.response_excerpt == "a" * 1023  # the "é" straddling byte 1024 is dropped
    again = await deliverer.deliver(make_request(sink.url("/hook")))
    assert again.outcome is Outcome.SUCCESS


async def test_cookies_are_never_kept_between_deliveries(deliverer: Deliverer, sink: Sink) -> None:
    await deliverer.deliver(make_request(sink.url("/set-cookie")))
    await deliverer.deliver(make_request(sink.url("/hook")))
    assert [r.headers.get("cookie") for r in sink.requests] == [None, None]


async def test_cancelling_a_delivery_propagates_and_frees_the_connection(
    deliverer: Deliverer, sink: Sink
) -> None:
    task = asyncio.create_task(deliverer.deliver(make_request(sink.url("/slow"))))
    await asyncio.wait_for(sink.slow_arrived.wait(), timeout=5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.wait_for(sink.slow_cancelled.wait(), timeout=5)  # the connection was closed
    result = await deliverer.deliver(make_request(sink.url("/hook")))
    assert result.outcome is Outcome.SUCCESS


@pytest.mark.parametrize(
    ("host", "reason"),
    [
        ("127.0.0.1", "loopback"),
        ("2130706433", "loopback"),
        ("0x7f.1", "loopback"),
        ("[::ffff:127.0.0.1]", "loopback"),
        # clients normalise these to 127.0.0.1; the policy refuses the spelling
        ("127\u30020\u30020\u30021", "ASCII"),
        ("\uff11\uff12\uff17.\uff10.\uff10.\uff11", "ASCII"),
    ],
)
async def test_forbidden_literal_address_is_blocked(host: str, reason: str) -> None:
    sink = Sink()
    await sink.start()
    try:
        for adapter_type in ADAPTERS.values():
            adapter = adapter_type(TargetGuard(allow_private=False))
            await adapter.start()
            try:
                result = await adapter.deliver(make_request(f"http://{host}:{sink.port}/hook"))
            finally:
                await adapter.close()
            assert result.outcome is Outcome.BLOCKED, (adapter_type, result)
            assert result.retryable is False
            assert result.error is not None and reason in result.error
        assert sink.requests == []
    finally:
        await sink.close()


@pytest.mark.parametrize("headers", [{"x-evil": "a\r\nHost: other"}, {"bad name": "1"}])
async def test_unsendable_tenant_header_is_blocked(
    deliverer: Deliverer, sink: Sink, headers: dict[str, str]
) -> None:
    result = await deliverer.deliver(make_request(sink.url("/hook"), headers=headers))
    assert (result.outcome, result.retryable) == (Outcome.BLOCKED, False)
    assert sink.requests == []
