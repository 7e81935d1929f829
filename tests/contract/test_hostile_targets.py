"""The delivery path against hostile receivers on loopback: an endless response body, a
slowloris status line, a body trickled a byte at a time. Each delivery ends within its
timeout (plus slack for a loaded machine), holds bounded memory and returns an outcome:
no exception escapes, so the executor records a failed attempt and carries on.

The servers are raw sockets, because a well-behaved HTTP library would not misbehave
this way on purpose.

A receiver that redirects (301/302/307/308) to a private address: the 3xx is the attempt's
answer and nothing connects where it points. The guard here allows private targets (the
hostile server is on loopback), so only the deliverer's own refusal to follow stands
between the redirect and the private address; listeners on those addresses (loopback on
another port, and [::1] where the host has IPv6) count every connection they get, and the
event loop's connect is watched so even addresses nobody listens on would show up.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

import pytest

from cronwire.adapters.http.httpx_deliverer import HttpxDeliverer
from cronwire.adapters.http.lean_deliverer import LeanDeliverer
from cronwire.domain.delivery import DeliveryRequest, Outcome, new_signing_secret
from tests.support.deliverer_sink import deliverer_fixture  # noqa: F401
from tests.support.hostile import measured

Deliverer = HttpxDeliverer | LeanDeliverer
ADAPTERS = {"httpx": HttpxDeliverer, "lean": LeanDeliverer}
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




def _request(url: str) -> DeliveryRequest:
    return DeliveryRequest(
        run_id=UUID("00000000-0000-4000-8000-000000000001"),
        schedule_id=UUID("00000000-0000-4000-8000-000000000002"),
        tenant_id=UUID("00000000-0000-4000-8000-00000000000a"),
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
        attempt = await measured(deliverer, _request(url))
    result = attempt.result
    assert attempt.seconds < TIMEOUT + SLACK, attempt
    assert attempt.heap_peak < MAX_HEAP_GROWTH, attempt
    if result.outcome is Outcome.SUCCESS:
        # A 2xx whose body never ends: the status is the answer, the rest is not read.
        assert result.status_code == 200 and len(result.response_excerpt or "") <= 1024
    else:
        assert result.retryable is (result.outcome is not Outcome.HTTP_ERROR
                                    or (result.status_code or 0) >= 500)
        assert result.error


@contextlib.asynccontextmanager
async def trap(host: str) -> AsyncIterator[tuple[int, list[object]]]:
    """A listener on ``host`` that records every connection it accepts (and answers none)."""
    accepted: list[object] = []

    async def handle(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(writer.get_extra_info("peername"))
        writer.transport.abort()

    server = await asyncio.start_server(handle, host, 0)
    try:
        yield int(server.sockets[0].getsockname()[1]), accepted
    finally:
        server.close()
        await server.wait_closed()


def _ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as probe:
            probe.bind(("::1", 0))
    except OSError:
        return False
    return True


@pytest.fixture
async def connects(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every address the event loop is asked to connect to; only loopback is let through,
    so a deliverer that followed a redirect to 10.0.0.1 would be seen, not let out."""
    loop = asyncio.get_running_loop()
    seen: list[Any] = []
    original = loop.sock_connect

    async def sock_connect(sock: socket.socket, address: Any) -> None:
        seen.append(address)
        if str(address[0]) not in ("127.0.0.1", "::1"):
            raise ConnectionRefusedError(f"test jail: {address} is not loopback")
        await original(sock, address)

    monkeypatch.setattr(loop, "sock_connect", sock_connect)
    return seen


PRIVATE_LOCATIONS = ["127.0.0.1", "169.254.169.254", "10.0.0.1", "[::1]"]


@pytest.mark.parametrize("status", [301, 302, 307, 308])
@pytest.mark.parametrize("private", PRIVATE_LOCATIONS)
async def test_a_redirect_to_a_private_address_is_the_answer_and_is_not_followed(
    deliverer: Deliverer, connects: list[Any], status: int, private: str
) -> None:
    if private == "[::1]" and not _ipv6_loopback():
        pytest.skip("no IPv6 loopback on this host")
    trap_host = private.strip("[]")
    listening = trap_host in ("127.0.0.1", "::1")
    async with contextlib.AsyncExitStack() as stack:
        trap_port, trapped = (await stack.enter_async_context(trap(trap_host))
                              if listening else (80, []))
        location = f"http://{private}:{trap_port}/latest/meta-data/"
        requests: list[bytes] = []

        async def redirect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            requests.append(await reader.readuntil(b"\r\n\r\n"))
            writer.write(f"HTTP/1.1 {status} Elsewhere\r\nLocation: {location}\r\n"
                         "Content-Length: 0\r\n\r\n".encode())
            await writer.drain()

        url = await stack.enter_async_context(hostile(redirect))
        result = await deliverer.deliver(_request(url))
        # A deliverer that follows does so before deliver() returns; this is only for
        # the listener to log an accept that the connect it answered already shows.
        await asyncio.sleep(0.05)
    assert (result.outcome, result.status_code, result.retryable) == (
        Outcome.HTTP_ERROR, status, False), result
    assert result.error is not None and "not followed" in result.error, result.error
    assert len(requests) == 1
    assert trapped == []  # nothing reached the private listener
    hostile_port = int(url.split(":")[2].split("/")[0])
    assert [(str(a[0]), int(a[1])) for a in connects] == [("127.0.0.1", hostile_port)]
