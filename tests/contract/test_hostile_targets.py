"""The delivery path against hostile receivers on loopback: an endless response body, a
slowloris status line, a body trickled a byte at a time. Each delivery ends within its
timeout (plus slack for a loaded machine), holds bounded memory and returns an outcome:
no exception escapes, so the executor records a failed attempt and carries on.

The servers are raw sockets, because a well-behaved HTTP library would not misbehave
this way on purpose.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import tracemalloc
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from uuid import UUID

import pytest

from cronwire.adapters.http.aiohttp_deliverer import AiohttpDeliverer
from cronwire.adapters.http.guard import TargetGuard
from cronwire.adapters.http.httpx_deliverer import HttpxDeliverer
from cronwire.domain.delivery import DeliveryRequest, Outcome, new_signing_secret

Deliverer = AiohttpDeliverer | HttpxDeliverer
Behaviour = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
TIMEOUT = 0.5
SLACK = 3.0  # a shared 2-core CI machine may be slow to schedule us
MAX_HEAP_GROWTH = 16 * 1024 * 1024
CHUNK = b"\0" * 65536


async def _read_request(reader: asyncio.StreamReader) -> None:
    with contextlib.suppress(Exception):
        await reader.readuntil(b"\r\n\r\n")


async def endless_body(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await _read_request(reader)
    writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100000000000\r\n\r\n")
    while True:  # until the client hangs up (bounded by the client's timeout)
        writer.write(CHUNK)
        await writer.drain()


async def endless_chunked(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await _read_request(reader)
    writer.write(b"HTTP/1.1 500 Oops\r\nTransfer-Encoding: chunked\r\n\r\n")
    while True:
        writer.write(b"10000\r\n" + CHUNK + b"\r\n")
        await writer.drain()


async def slowloris_status(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await _read_request(reader)
    for byte in b"HTTP/1.1 200 OK\r\nX-Slow: " + b"a" * 10_000:
        writer.write(bytes([byte]))
        await writer.drain()
        await asyncio.sleep(0.05)


async def trickled_body(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await _read_request(reader)
    writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n")
    for _ in range(100_000):
        writer.write(b"x")
        await writer.drain()
        await asyncio.sleep(0.05)


async def huge_headers(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await _read_request(reader)
    writer.write(b"HTTP/1.1 200 OK\r\n")
    while True:
        writer.write(b"X-Junk: " + b"j" * 8000 + b"\r\n")
        await writer.drain()


@contextlib.asynccontextmanager
async def hostile(behaviour: Behaviour) -> AsyncIterator[str]:
    handlers: set[asyncio.Task[None]] = set()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        handlers.add(task)
        try:
            with contextlib.suppress(ConnectionError, OSError):
                await behaviour(reader, writer)
        finally:
            writer.transport.abort()
            handlers.discard(task)

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/hook"
    finally:
        server.close()
        for task in list(handlers):
            task.cancel()
        await asyncio.gather(*handlers, return_exceptions=True)
        await server.wait_closed()


@pytest.fixture(params=["aiohttp", "httpx"])
async def deliverer(request: pytest.FixtureRequest) -> AsyncIterator[Deliverer]:
    kind = AiohttpDeliverer if request.param == "aiohttp" else HttpxDeliverer
    adapter = kind(TargetGuard(allow_private=True))
    await adapter.start()
    yield adapter
    await adapter.close()


def _request(url: str) -> DeliveryRequest:
    return DeliveryRequest(
        run_id=UUID("00000000-0000-4000-8000-000000000001"),
        schedule_id=UUID("00000000-0000-4000-8000-000000000002"),
        idempotency_key="msg_hostile", scheduled_for=datetime.now(UTC),
        attempt=1, method="POST", url=url, headers={}, body=b"{}",
        signing_secrets=(new_signing_secret(),), timeout_seconds=TIMEOUT,
    )


@pytest.mark.parametrize("behaviour", [endless_body, endless_chunked, slowloris_status,
                                       trickled_body, huge_headers],
                         ids=lambda b: b.__name__)
async def test_a_hostile_receiver_costs_one_bounded_attempt(
    deliverer: Deliverer, behaviour: Behaviour
) -> None:
    async with hostile(behaviour) as url:
        tracemalloc.start()
        began = time.monotonic()
        try:
            result = await deliverer.deliver(_request(url))
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        elapsed = time.monotonic() - began
    assert elapsed < TIMEOUT + SLACK, (result, elapsed)
    assert peak < MAX_HEAP_GROWTH, (result, peak)
    if result.outcome is Outcome.SUCCESS:
        # A 2xx whose body never ends: the status is the answer, the rest is not read.
        assert result.status_code == 200 and len(result.response_excerpt or "") <= 1024
    else:
        assert result.retryable is (result.outcome is not Outcome.HTTP_ERROR
                                    or (result.status_code or 0) >= 500)
        assert result.error
