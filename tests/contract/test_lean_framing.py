"""LeanDeliverer reads every HTTP/1.1 body framing a receiver may choose (the contract
suite's aiohttp sink always sends Content-Length): raw answers from a socket server."""

from __future__ import annotations

import asyncio
import contextlib
import gzip
from collections.abc import AsyncIterator

import pytest

from cronwire.adapters.http.guard import TargetGuard
from cronwire.adapters.http.lean_deliverer import LeanDeliverer
from cronwire.domain.delivery import Outcome
from tests.contract.test_deliverer_contract import make_request

ANSWERS = {
    "/chunked": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                b"3\r\nabc\r\n4;ext=1\r\ndefg\r\n0\r\nX-Trailer: 1\r\n\r\n",
    "/interim": b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok",
    "/close": b"HTTP/1.0 500 Oops\r\n\r\nbody until close",
    "/gzip": b"HTTP/1.1 400 Bad\r\nContent-Encoding: gzip\r\nContent-Length: %d\r\n\r\n",
    "/garbage": b"SMTP ready\r\n\r\n",
}
GZIPPED = gzip.compress(b"why it failed")


async def _answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = int(next((line.split(b":")[1] for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length")), b"0"))
            await reader.readexactly(length)
            path = head.split(b" ")[1].decode()
            if path == "/gzip":
                writer.write(ANSWERS[path] % len(GZIPPED) + GZIPPED)
            else:
                writer.write(ANSWERS[path])
            await writer.drain()
            if path in ("/close", "/garbage"):
                break
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    writer.close()


@pytest.fixture
async def raw_port() -> AsyncIterator[int]:
    server = await asyncio.start_server(_answer, "127.0.0.1", 0)
    yield server.sockets[0].getsockname()[1]
    server.close()
    await server.wait_closed()


@pytest.mark.parametrize(
    ("path", "outcome", "status", "excerpt"),
    [("/chunked", Outcome.SUCCESS, 200, "abcdefg"),
     ("/interim", Outcome.SUCCESS, 201, "ok"),
     ("/close", Outcome.HTTP_ERROR, 500, "body until close"),
     ("/gzip", Outcome.HTTP_ERROR, 400, "why it failed"),
     ("/garbage", Outcome.CONNECTION_ERROR, None, None)],
)
async def test_each_framing_is_read(raw_port: int, path: str, outcome: Outcome,
                                    status: int | None, excerpt: str | None) -> None:
    deliverer = LeanDeliverer(TargetGuard(allow_private=True))
    await deliverer.start()
    try:
        for _ in range(2):  # the second goes over the kept-alive connection, if any
            result = await deliverer.deliver(make_request(f"http://127.0.0.1:{raw_port}{path}"))
            assert (result.outcome, result.status_code, result.response_excerpt) == (
                outcome, status, excerpt), result
    finally:
        await deliverer.close()


async def test_the_attempts_timeout_bounds_the_wait_for_a_connection_slot_and_frees_it() -> None:
    """The timeout covers the whole attempt, including a wait for a pool slot held by a
    hung request, and every slot is given back whatever ended the attempt."""
    release, asked = asyncio.Event(), asyncio.Event()
    handlers: set[asyncio.Task[object]] = set()

    def track() -> None:
        task = asyncio.current_task()
        assert task is not None
        handlers.add(task)

    async def hang(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        track()
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
            await reader.readuntil(b"\r\n\r\n")
            asked.set()
            await release.wait()  # never answers within the attempts' timeouts
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()

    server = await asyncio.start_server(hang, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        track()
        await _answer(reader, writer)

    ok_server = await asyncio.start_server(answer, "127.0.0.1", 0)
    ok_url = f"http://127.0.0.1:{ok_server.sockets[0].getsockname()[1]}/interim"
    deliverer = LeanDeliverer(TargetGuard(allow_private=True), max_connections=1)
    await deliverer.start()
    try:
        url = f"http://127.0.0.1:{port}/hang"
        loop = asyncio.get_running_loop()
        began = loop.time()
        holder = asyncio.ensure_future(deliverer.deliver(make_request(url, timeout_seconds=1.0)))
        await asyncio.wait_for(asked.wait(), 5)  # the first attempt holds the only slot
        waiting = await deliverer.deliver(make_request(url, timeout_seconds=0.3))
        waited = loop.time() - began
        assert waiting.outcome is Outcome.TIMEOUT and waited < 0.9, (waiting, waited)
        first = await holder
        assert first.outcome is Outcome.TIMEOUT and 900 <= first.duration_ms < 3000, first
        # The slot came back from both timed-out attempts: a receiver that answers gets
        # its request through the only slot.
        answered = await deliverer.deliver(make_request(ok_url, timeout_seconds=0.5))
        assert answered.outcome is Outcome.SUCCESS, answered
    finally:
        release.set()
        await deliverer.close()
        await asyncio.wait(handlers, timeout=5)  # each handler saw its connection end
        for each in (server, ok_server):
            each.close()
            await each.wait_closed()
