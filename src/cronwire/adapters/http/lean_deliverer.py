"""A lean HTTP/1.1 Deliverer: one asyncio Protocol per keep-alive connection.

A webhook delivery needs little of a general HTTP client: one request with a small
body, a status line, a few headers and at most 1 KiB of the answer. aiohttp's client
layers (request/response objects, payload writers, stream readers, tracing, cookie and
redirect machinery) were most of an executor's CPU in the 100k burst (ADR 0012), so
this adapter writes each request as one buffer and parses the answer itself.

The address guarantee is the simplest possible here: a new connection dials only an
address :meth:`TargetGuard.resolve_checked` returned for the URL's host, and a pooled
connection is reused only for the same scheme, host and port it was checked for. The
Host header and TLS SNI keep the tenant's host name.
"""

from __future__ import annotations

import asyncio
import ssl
import time
import zlib
from collections import deque
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import TypeVar

from yarl import URL

from cronwire.adapters.http.aiohttp_deliverer import _parsed_target
from cronwire.adapters.http.attempt_timer import AttemptTimer
from cronwire.adapters.http.guard import TargetGuard
from cronwire.domain.delivery import (
    EXCERPT_BYTES,
    DeliveryRequest,
    DeliveryResult,
    Outcome,
    default_user_agent,
    delivery_headers,
    error_text,
    parse_retry_after,
    response_excerpt,
    status_error,
    status_outcome,
)
from cronwire.domain.errors import InvalidTarget, RequestNotSent, TargetRefused
from cronwire.domain.netpolicy import DEFAULT_PORTS

DRAIN_BYTES = 64 * 1024  # read this much past the excerpt to keep a connection reusable
MAX_HEAD_BYTES = 64 * 1024
IDLE_SECONDS = 4.0  # below common server keep-alive timeouts (uvicorn 5 s, nginx 75 s)
_NO_BODY_STATUS = frozenset({204, 304})

PoolKey = tuple[str, str, int]
T = TypeVar("T")


class ProtocolError(ConnectionError):
    """The receiver's answer is not HTTP/1.x we can read."""


class _Connection(asyncio.Protocol):
    """Bytes in, one waiter woken per arrival; nothing else."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.closed = False
        self.idle_since = 0.0
        # The current attempt's end, on the loop's clock: a wait for bytes past it raises
        # TimeoutError. One timer per wait instead of an asyncio.timeout() per attempt
        # (that context manager was ~6% of an executor's CPU in the 100k burst).
        self.deadline: float | None = None
        self._waiter: asyncio.Future[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        self._wake()

    def eof_received(self) -> bool:
        self.closed = True
        self._wake()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._wake()

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    async def more(self) -> None:
        """Wait for more bytes; ConnectionError if the peer has gone."""
        if self.closed:
            raise ConnectionResetError("the receiver closed the connection")
        loop = asyncio.get_running_loop()
        waiter = self._waiter = loop.create_future()
        timer = loop.call_at(self.deadline, _time_out, waiter) if self.deadline is not None else None
        try:
            await waiter
        finally:
            self._waiter = None
            if timer is not None:
                timer.cancel()

    def abort(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.abort()

    @property
    def usable(self) -> bool:
        return not self.closed and self.transport is not None and not self.transport.is_closing()


def _time_out(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_exception(TimeoutError())


class _Answer:
    __slots__ = ("body", "complete", "headers", "reason", "status", "version")

    def __init__(self, status: int, reason: str, version: bytes, headers: dict[str, str]) -> None:
        self.status = status
        self.reason = reason
        self.version = version
        self.headers = headers
        self.body = b""
        self.complete = False  # body read to its end: the connection can be reused


class LeanDeliverer:
    """Delivers runs over pooled HTTP/1.1 connections. ``start()`` before use."""

    def __init__(
        self, guard: TargetGuard, *, max_connections: int = 1000, user_agent: str | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._guard = guard
        # The clock of DeliveryRequest.send_by_monotonic: the executor's Clock.monotonic.
        self._monotonic = monotonic
        self._user_agent = user_agent or default_user_agent()
        self._slots = asyncio.Semaphore(max_connections)
        self._idle: dict[PoolKey, deque[_Connection]] = {}
        self._tls: ssl.SSLContext | None = None
        self._started = False

    async def start(self) -> None:
        self._started = True

    async def close(self) -> None:
        self._started = False
        for connections in self._idle.values():
            for connection in connections:
                connection.abort()
        self._idle.clear()

    async def deliver(self, req: DeliveryRequest) -> DeliveryResult:
        """One attempt. Never raises for delivery failures; CancelledError propagates."""
        if not self._started:
            raise RuntimeError("LeanDeliverer.start() was not called")
        timer = AttemptTimer()
        try:
            # An IP literal needs no check of its own here (aiohttp's adapter does one):
            # every new connection, literal or name, is dialled through the guard.
            url, _literal_port = _parsed_target(req.url)
            headers = delivery_headers(
                req, int(timer.started_at.timestamp()), user_agent=self._user_agent
            )
            deadline = asyncio.get_running_loop().time() + req.timeout_seconds
            answer = await self._exchange(
                url, req.method, headers, req.body, req.send_by_monotonic, deadline)
        except RequestNotSent:
            raise
        except (InvalidTarget, TargetRefused) as exc:
            return timer.result(Outcome.BLOCKED, error=error_text(exc))
        except TimeoutError as exc:
            detail = f"no complete response within {req.timeout_seconds:g}s"
            return timer.result(Outcome.TIMEOUT, error=error_text(exc, detail))
        except Exception as exc:  # every other failure is a failed attempt
            return timer.result(Outcome.CONNECTION_ERROR, error=error_text(exc))
        status = answer.status
        location = answer.headers.get("location") if 300 <= status <= 399 else None
        return timer.result(
            status_outcome(status),
            status=status,
            error=status_error(status, answer.reason, location),
            excerpt=response_excerpt(_decoded(answer)) if answer.body else None,
            retry_after=parse_retry_after(answer.headers.get("retry-after"), datetime.now(UTC))
            if "retry-after" in answer.headers else None,
        )

    # -- one request/response on a pooled connection ----------------------------------

    async def _exchange(
        self, url: URL, method: str, headers: dict[str, str], body: bytes,
        send_by: float | None = None, deadline: float | None = None,
    ) -> _Answer:
        """One request and its answer; TimeoutError once the loop's clock passes
        ``deadline`` (waiting for a slot, connecting or reading)."""
        scheme = url.scheme
        host = url.raw_host or ""
        port = url.port or DEFAULT_PORTS[scheme]
        key = (scheme, host, port)
        data = _request_bytes(method, url, host, port, headers, body)
        if self._slots.locked():
            await _within(self._slots.acquire(), deadline)
        else:
            await self._slots.acquire()
        try:
            connection = self._pooled(key)
            reused = connection is not None
            if connection is None:
                connection = await _within(self._connect(scheme, host, port), deadline)
            connection.deadline = deadline
            try:
                assert connection.transport is not None
                _check_send_window(send_by, self._monotonic)
                connection.transport.write(data)
                try:
                    answer = await _read_answer(connection, method)
                except ConnectionError:
                    if not reused or connection.buffer:
                        raise
                    # A kept-alive connection the receiver closed just as we wrote: nothing
                    # came back, so the request is sent once more on a fresh connection.
                    connection.abort()
                    connection = await _within(self._connect(scheme, host, port), deadline)
                    connection.deadline = deadline
                    assert connection.transport is not None
                    _check_send_window(send_by, self._monotonic)
                    connection.transport.write(data)
                    answer = await _read_answer(connection, method)
            except RequestNotSent:
                # Nothing was written on it: a pooled connection can serve the next request.
                if connection.usable and not connection.buffer:
                    connection.idle_since = time.monotonic()
                    self._idle.setdefault(key, deque()).append(connection)
                else:
                    connection.abort()
                raise
            except BaseException:
                connection.abort()  # a cancelled or broken exchange never goes back
                raise
            if answer.complete and _keeps_alive(answer) and connection.usable:
                connection.idle_since = time.monotonic()
                self._idle.setdefault(key, deque()).append(connection)
            else:
                connection.abort()
            return answer
        finally:
            self._slots.release()

    def _pooled(self, key: PoolKey) -> _Connection | None:
        connections = self._idle.get(key)
        now = time.monotonic()
        while connections:
            connection = connections.pop()
            if connection.usable and now - connection.idle_since < IDLE_SECONDS:
                return connection
            connection.abort()
        return None

    async def _connect(self, scheme: str, host: str, port: int) -> _Connection:
        """Dial the checked addresses in order; only those (the guard's promise)."""
        loop = asyncio.get_running_loop()
        tls = self._tls_context() if scheme == "https" else None
        last: OSError | None = None
        for address in await self._guard.resolve_checked(host, port):
            try:
                _transport, connection = await loop.create_connection(
                    _Connection, host=address, port=port, ssl=tls,
                    server_hostname=host if tls is not None else None,
                )
                return connection
            except OSError as exc:
                last = exc
        raise last or ConnectionError(f"no address to connect to for {host!r}")

    def _tls_context(self) -> ssl.SSLContext:
        if self._tls is None:
            self._tls = ssl.create_default_context()
        return self._tls


async def _within(awaitable: Awaitable[T], deadline: float | None) -> T:
    """``awaitable`` bounded by ``deadline`` (the loop's clock): the rarer waits of an
    attempt (a pool slot, a new connection) pay for asyncio.wait_for."""
    if deadline is None:
        return await awaitable
    remaining = deadline - asyncio.get_running_loop().time()
    return await asyncio.wait_for(awaitable, max(0.0, remaining))


def _request_bytes(method: str, url: URL, host: str, port: int, headers: dict[str, str],
                   body: bytes) -> bytes:
    host_text = f"[{host}]" if ":" in host else host
    if port != DEFAULT_PORTS[url.scheme]:
        host_text = f"{host_text}:{port}"
    head = [f"{method} {url.raw_path_qs or '/'} HTTP/1.1\r\nHost: {host_text}\r\n"]
    head.extend(f"{name}: {value}\r\n" for name, value in headers.items())
    head.append(f"Content-Length: {len(body)}\r\n\r\n")
    return "".join(head).encode("utf-8") + body


def _keeps_alive(answer: _Answer) -> bool:
    connection = answer.headers.get("connection", "").lower()
    if answer.version == b"HTTP/1.0":
        return "keep-alive" in connection
    return "close" not in connection


async def _read_answer(connection: _Connection, method: str) -> _Answer:
    answer = await _read_head(connection)
    while 100 <= answer.status <= 199:  # interim answers (100 Continue, 103 Early Hints)
        answer = await _read_head(connection)
    if method == "HEAD" or answer.status in _NO_BODY_STATUS:
        answer.complete = True
        return answer
    encoding = answer.headers.get("transfer-encoding", "").lower()
    if "chunked" in encoding:
        await _read_chunked(connection, answer)
    elif "content-length" in answer.headers:
        try:
            length = int(answer.headers["content-length"])
        except ValueError:
            raise ProtocolError("malformed Content-Length") from None
        await _read_length(connection, answer, length)
    else:  # delimited by the connection's end: read the excerpt, then give it up
        await _read_until_close(connection, answer)
    return answer


async def _read_head(connection: _Connection) -> _Answer:
    buffer = connection.buffer
    while (end := buffer.find(b"\r\n\r\n")) < 0:
        if len(buffer) > MAX_HEAD_BYTES:
            raise ProtocolError("response head larger than 64 KiB")
        await connection.more()
    lines = bytes(buffer[:end]).split(b"\r\n")
    del buffer[: end + 4]
    parts = lines[0].split(b" ", 2)
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or not parts[1].isdigit():
        raise ProtocolError(f"not an HTTP/1.x status line: {lines[0][:80]!r}")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(b":")
        if sep:
            headers[name.strip().lower().decode("latin-1")] = value.strip().decode("latin-1")
    reason = parts[2].decode("latin-1", errors="replace") if len(parts) > 2 else ""
    return _Answer(int(parts[1]), reason, parts[0], headers)


async def _read_length(connection: _Connection, answer: _Answer, length: int) -> None:
    keep = min(length, EXCERPT_BYTES)
    if length > EXCERPT_BYTES + DRAIN_BYTES:  # too long to drain: excerpt, then hang up
        while len(connection.buffer) < keep:
            await connection.more()
        answer.body = bytes(connection.buffer[:keep])
        return
    buffer = connection.buffer
    while len(buffer) < length:
        await connection.more()
    answer.body = bytes(buffer[:keep])
    del buffer[:length]
    answer.complete = True


async def _read_chunked(connection: _Connection, answer: _Answer) -> None:
    buffer = connection.buffer
    body = bytearray()
    total = 0
    while True:
        while (end := buffer.find(b"\r\n")) < 0:
            await connection.more()
        size_text = bytes(buffer[:end]).split(b";", 1)[0].strip()
        try:
            size = int(size_text, 16)
        except ValueError:
            raise ProtocolError("malformed chunk size") from None
        del buffer[: end + 2]
        if size == 0:
            while (end := buffer.find(b"\r\n")) != 0:  # trailers, then the empty line
                if end > 0:
                    del buffer[: end + 2]
                else:
                    await connection.more()
            del buffer[:2]
            answer.body = bytes(body)
            answer.complete = True
            return
        total += size
        if total > EXCERPT_BYTES + DRAIN_BYTES:
            answer.body = bytes(body)
            return  # too long: the connection is given up
        while len(buffer) < size + 2:
            await connection.more()
        if len(body) < EXCERPT_BYTES:
            body += buffer[: min(size, EXCERPT_BYTES - len(body))]
        del buffer[: size + 2]


async def _read_until_close(connection: _Connection, answer: _Answer) -> None:
    buffer = connection.buffer
    while not connection.closed and len(buffer) < EXCERPT_BYTES:
        try:
            await connection.more()
        except ConnectionError:
            break
    answer.body = bytes(buffer[:EXCERPT_BYTES])


def _decoded(answer: _Answer) -> bytes:
    """The excerpt as the receiver meant it: gzip/deflate bodies are inflated (partly,
    when only the start was read); anything undecodable is kept as it came."""
    encoding = answer.headers.get("content-encoding", "").lower()
    if encoding not in ("gzip", "deflate", "x-gzip"):
        return answer.body
    try:
        inflate = zlib.decompressobj(wbits=47)  # gzip or zlib header, detected
        return inflate.decompress(answer.body, EXCERPT_BYTES)
    except zlib.error:
        return answer.body


def _check_send_window(send_by: float | None, monotonic: Callable[[], float]) -> None:
    """Raise RequestNotSent when the request's send deadline passed while it waited for a
    pool slot or a connection (checked right before the bytes are written)."""
    if send_by is not None and monotonic() > send_by:
        raise RequestNotSent("send window closed before the request was written")
