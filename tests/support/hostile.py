"""Hostile HTTP receivers on loopback: raw asyncio socket servers that misbehave on
purpose (a well-behaved HTTP library would not), recording what they were sent.

``Receiver(behaviour)`` runs ``behaviour(conn)`` for every connection it accepts; ``conn``
reads requests (head, then a Content-Length body unless told to ignore it) and writes
raw bytes. The receiver counts connections opened and still open, so tests can see a
client's sockets from the other end.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from cronwire.domain.delivery import DeliveryRequest, DeliveryResult
from tests.support.polling import wait_until


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    connection: int  # the receiver's number of the connection it came on (0, 1, ...)


class Conn:
    """One accepted connection, as a behaviour sees it."""

    def __init__(self, receiver: Receiver, number: int, reader: asyncio.StreamReader,
                 writer: asyncio.StreamWriter) -> None:
        self.receiver = receiver
        self.number = number
        self.reader = reader
        self.writer = writer
        self.served = 0  # requests read on this connection

    async def request(self, *, ignore_body: bool = False) -> Request | None:
        """The next request, or None once the client closed. ``ignore_body``: leave a
        Content-Length body in the stream (a receiver that ignores bodies on GET), where
        it is read as the next request."""
        try:
            head = await self.reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            return None
        lines = head.decode("latin-1").split("\r\n")
        method, path, _ = [*lines[0].split(" ", 2), "", ""][:3]
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if sep:
                headers[name.strip().lower()] = value.strip()
        body = b""
        length = int(headers.get("content-length", "0") or 0)
        if length and not ignore_body:
            try:
                body = await self.reader.readexactly(length)
            except (asyncio.IncompleteReadError, ConnectionError):
                return None
        self.served += 1
        request = Request(method, path, headers, body, self.number)
        self.receiver.requests.append(request)
        return request

    async def send(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def closed_by_client(self) -> None:
        """Until the client closes its side (reading and dropping whatever it sends)."""
        with contextlib.suppress(ConnectionError):
            while await self.reader.read(65536):
                pass


Behaviour = Callable[[Conn], Awaitable[None]]


def answer(status: int = 200, body: bytes = b"ok", *, reason: str = "OK",
           headers: str = "") -> bytes:
    """A well-formed HTTP/1.1 answer with a Content-Length body."""
    return (f"HTTP/1.1 {status} {reason}\r\nContent-Length: {len(body)}\r\n{headers}\r\n"
            .encode() + body)


@dataclass
class Receiver:
    behaviour: Behaviour
    host: str = "127.0.0.1"
    requests: list[Request] = field(default_factory=list)
    opened: int = 0
    open_now: int = 0
    most_open: int = 0
    port: int = 0
    _server: asyncio.Server | None = None
    _handlers: set[asyncio.Task[Any]] = field(default_factory=set)

    def url(self, path: str = "/hook") -> str:
        return f"http://{self.host}:{self.port}{path}"

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        number = self.opened
        self.opened += 1
        self.open_now += 1
        self.most_open = max(self.most_open, self.open_now)
        try:
            with contextlib.suppress(ConnectionError, OSError):
                await self.behaviour(Conn(self, number, reader, writer))
        finally:
            self.open_now -= 1
            writer.transport.abort()
            self._handlers.discard(task)

    async def wait_closed_by_clients(self, within: float = 20.0) -> None:
        """Until every connection the receiver accepted has ended."""
        await wait_until(lambda: self.open_now == 0, within=within)

    async def __aenter__(self) -> Receiver:
        self._server = await asyncio.start_server(self._handle, self.host, self.port)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *_exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._handlers):
            task.cancel()
        await asyncio.gather(*self._handlers, return_exceptions=True)
        await self._server.wait_closed()


async def keep_alive_ok(conn: Conn) -> None:
    """Answers every request ``200 ok``, keeping the connection."""
    while await conn.request() is not None:
        await conn.send(answer())


class LoopLag:
    """The longest the event loop went without running a 10 ms ticker (a stall)."""

    def __init__(self) -> None:
        self.worst = 0.0
        self._task: asyncio.Task[None] | None = None

    async def _tick(self) -> None:
        loop = asyncio.get_running_loop()
        last = loop.time()
        while True:
            await asyncio.sleep(0.01)
            now = loop.time()
            self.worst = max(self.worst, now - last - 0.01)
            last = now

    async def __aenter__(self) -> LoopLag:
        self._task = asyncio.create_task(self._tick())
        return self

    async def __aexit__(self, *_exc: object) -> None:
        assert self._task is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task


# -- receivers that never stop sending (ADR 0026) ---------------------------------------

async def endless_chunk_size_line(conn: Conn) -> None:
    await conn.request()
    await conn.send(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=")
    while True:
        await conn.send(b"x" * 65536)


async def endless_trailers(conn: Conn) -> None:
    await conn.request()
    await conn.send(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n")
    while True:
        await conn.send(b"X-Trailer: 1\r\n" * 4096)


async def endless_continue(conn: Conn) -> None:
    await conn.request()
    while True:
        await conn.send(b"HTTP/1.1 100 Continue\r\n\r\n" * 2048)


async def ignores_get_bodies(conn: Conn) -> None:
    """Reads no body of a GET, so a GET body is read as the next request (the
    cross-tenant reproduction of ADR 0026): answers ``/a``, ``/b`` and ``/b-chosen`` by name."""
    while (request := await conn.request(ignore_body=True)) is not None:
        if request.method == "POST" and request.headers.get("content-length"):
            await conn.reader.readexactly(int(request.headers["content-length"]))
        body = {"/a": b"private-to-A", "/b": b"b-own", "/b-chosen": b"chosen-by-B"}
        await conn.send(answer(200, body.get(request.path, b"?")))


SMUGGLED_REQUEST = "GET /b-chosen HTTP/1.1\r\nHost: x\r\n\r\n"


class Delivers(Protocol):
    async def deliver(self, request: DeliveryRequest) -> DeliveryResult: ...


@dataclass
class Measured:
    result: DeliveryResult
    seconds: float
    heap_peak: int  # bytes (tracemalloc) while the attempt ran


async def measured(deliverer: Delivers, request: DeliveryRequest) -> Measured:
    """One attempt with its wall-clock time and its peak heap."""
    tracemalloc.start()
    began = time.monotonic()
    try:
        result = await deliverer.deliver(request)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return Measured(result, time.monotonic() - began, peak)
