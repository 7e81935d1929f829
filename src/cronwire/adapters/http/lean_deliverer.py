"""A lean HTTP/1.1 Deliverer: one asyncio Protocol per keep-alive connection.

A webhook delivery needs little of a general HTTP client: one request with a small
body, a status line, a few headers and at most 1 KiB of the answer. aiohttp's client
layers (request/response objects, payload writers, stream readers, tracing, cookie and
redirect machinery) were most of an executor's CPU in the 100k burst (ADR 0012), so
this adapter writes each request as one buffer and parses the answer itself (the
HTTP/1.1 side is http1.py; this module is the pool, the deadlines and the outcome).

The address guarantee is the simplest possible here: a new connection dials only an
address :meth:`TargetGuard.resolve_checked` returned for the URL's host, and a pooled
connection is reused only for the same scheme, host and port it was checked for. The
Host header and TLS SNI keep the tenant's host name.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections import deque
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import TypeVar

from yarl import URL

from cronwire.adapters.http.attempt_timer import AttemptTimer
from cronwire.adapters.http.guard import TargetGuard
from cronwire.adapters.http.http1 import (
    Answer,
    Connection,
    decoded,
    keeps_alive,
    read_answer,
    request_bytes,
)
from cronwire.adapters.http.target_url import parse_target
from cronwire.domain.delivery import (
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

IDLE_SECONDS = 4.0  # below common server keep-alive timeouts (uvicorn 5 s, nginx 75 s)

PoolKey = tuple[str, str, int]
T = TypeVar("T")


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
        self._idle: dict[PoolKey, deque[Connection]] = {}
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
            url, _literal_port = parse_target(req.url)
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
            excerpt=response_excerpt(decoded(answer)) if answer.body else None,
            retry_after=parse_retry_after(answer.headers.get("retry-after"), datetime.now(UTC))
            if "retry-after" in answer.headers else None,
        )

    # -- one request/response on a pooled connection ----------------------------------

    async def _exchange(
        self, url: URL, method: str, headers: dict[str, str], body: bytes,
        send_by: float | None = None, deadline: float | None = None,
    ) -> Answer:
        """One request and its answer; TimeoutError once the loop's clock passes
        ``deadline`` (waiting for a slot, connecting or reading)."""
        scheme = url.scheme
        host = url.raw_host or ""
        port = url.port or DEFAULT_PORTS[scheme]
        key = (scheme, host, port)
        data = request_bytes(method, url, host, port, headers, body)
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
                    answer = await read_answer(connection, method)
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
                    answer = await read_answer(connection, method)
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
            if answer.complete and keeps_alive(answer) and connection.usable:
                connection.idle_since = time.monotonic()
                self._idle.setdefault(key, deque()).append(connection)
            else:
                connection.abort()
            return answer
        finally:
            self._slots.release()

    def _pooled(self, key: PoolKey) -> Connection | None:
        connections = self._idle.get(key)
        now = time.monotonic()
        while connections:
            connection = connections.pop()
            if connection.usable and now - connection.idle_since < IDLE_SECONDS:
                return connection
            connection.abort()
        return None

    async def _connect(self, scheme: str, host: str, port: int) -> Connection:
        """Dial the checked addresses in order; only those (the guard's promise)."""
        loop = asyncio.get_running_loop()
        tls = self._tls_context() if scheme == "https" else None
        last: OSError | None = None
        for address in await self._guard.resolve_checked(host, port):
            try:
                _transport, connection = await loop.create_connection(
                    Connection, host=address, port=port, ssl=tls,
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


def _check_send_window(send_by: float | None, monotonic: Callable[[], float]) -> None:
    """Raise RequestNotSent when the request's send deadline passed while it waited for a
    pool slot or a connection (checked right before the bytes are written)."""
    if send_by is not None and monotonic() > send_by:
        raise RequestNotSent("send window closed before the request was written")
