"""A lean HTTP/1.1 Deliverer: one asyncio Protocol per keep-alive connection.

A webhook delivery needs little of a general HTTP client: one request with a small
body, a status line, a few headers and at most 1 KiB of the answer. aiohttp's client
layers were most of an executor's CPU in the 100k burst (ADR 0012), so this adapter
writes each request as one buffer and has llhttp parse the answer (http1.py); this
module is the pool, the deadlines and the outcome. Every receiver is hostile (ADR 0026):
connections are never shared between tenants, are reused only after a clean answer,
are bounded in number, and a request that may have reached a receiver is never resent.

The address guarantee is the simplest possible here: a new connection dials only an
address :meth:`TargetGuard.resolve_checked` returned for the URL's host, and a pooled
connection is reused only for the same tenant, scheme, host and port it was checked
for. The Host header and TLS SNI keep the tenant's host name.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import ssl
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TypeVar

from yarl import URL

from cronwire.adapters.http.attempt_timer import AttemptTimer
from cronwire.adapters.http.connection_pool import IdlePool, PoolKey
from cronwire.adapters.http.guard import TargetGuard
from cronwire.adapters.http.http1 import Connection, decoded, request_bytes
from cronwire.adapters.http.response_reader import Answer
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

log = logging.getLogger(__name__)

IDLE_SECONDS = 4.0  # below common server keep-alive timeouts (uvicorn 5 s, nginx 75 s)
REAP_SECONDS = 1.0  # how often idle connections past IDLE_SECONDS are closed
_OUT_OF_FDS = frozenset({errno.EMFILE, errno.ENFILE})

T = TypeVar("T")


@dataclass
class PoolStats:
    """What the pool did, for tests and logs."""

    connects: int = 0
    reuses: int = 0
    # A connection attempt that failed for want of file descriptors, retried after the
    # idle connections were closed: nothing had been sent, so the retry is not a resend.
    fd_retries: int = 0
    # Requests whose send deadline had passed right after their write: the process was
    # stopped between the last check and the write (or just after it). The receiver may
    # see such a run twice, like a request in flight at a crash (ADR 0022).
    late_sends: int = 0


class LeanDeliverer:
    """Delivers runs over pooled HTTP/1.1 connections. ``start()`` before use.

    At most ``max_connections`` sockets are open at once, busy and idle together; idle
    ones are capped at ``max_idle_per_key`` per (tenant, origin) and ``max_connections``
    in all, and closed after IDLE_SECONDS."""

    def __init__(
        self, guard: TargetGuard, *, max_connections: int = 1000,
        max_idle_per_key: int | None = None, user_agent: str | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        on_late_send: Callable[[], None] | None = None,
    ) -> None:
        self._guard = guard
        self._on_late_send = on_late_send
        # The clock of DeliveryRequest.send_by_monotonic: the executor's Clock.monotonic.
        self._monotonic = monotonic
        self._user_agent = user_agent or default_user_agent()
        self._max_connections = max(1, max_connections)
        self._slots = asyncio.Semaphore(self._max_connections)
        self._in_use = 0  # sockets open or opening outside the idle pool
        self._idle = IdlePool(
            per_key=max_idle_per_key or self._max_connections,
            total=self._max_connections, idle_seconds=IDLE_SECONDS)
        self.stats = PoolStats()
        self._tls: ssl.SSLContext | None = None
        self._reaper: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def idle_connections(self) -> int:
        return len(self._idle)

    async def start(self) -> None:
        if self._reaper is None:
            self._loop = asyncio.get_running_loop()  # asked once, not per delivery (getpid)
            self._reaper = asyncio.create_task(self._reap(), name="lean-deliverer-reaper")

    async def close(self) -> None:
        reaper, self._reaper = self._reaper, None
        self._loop = None
        if reaper is not None:
            reaper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reaper
        self._idle.close_all()

    async def _reap(self) -> None:
        while True:
            await asyncio.sleep(REAP_SECONDS)
            self._idle.reap()

    async def deliver(self, req: DeliveryRequest) -> DeliveryResult:
        """One attempt. Never raises for delivery failures; CancelledError propagates."""
        loop = self._loop
        if self._reaper is None or loop is None:
            raise RuntimeError("LeanDeliverer.start() was not called")
        timer = AttemptTimer()
        try:
            # An IP literal needs no check of its own here: every new connection, literal
            # or name, is dialled through the guard.
            url, _literal_port = parse_target(req.url)
            headers = delivery_headers(
                req, int(timer.started_at.timestamp()), user_agent=self._user_agent
            )
            deadline = loop.time() + req.timeout_seconds
            answer = await self._exchange(
                req, url, headers, req.send_by_monotonic, deadline)
        except RequestNotSent:
            raise
        except (InvalidTarget, TargetRefused) as exc:
            return timer.result(Outcome.BLOCKED, error=error_text(exc))
        except TimeoutError as exc:
            detail = f"no response within {req.timeout_seconds:g}s"
            return timer.result(Outcome.TIMEOUT, error=error_text(exc, detail))
        except Exception as exc:  # every other failure is a failed attempt
            return timer.result(Outcome.CONNECTION_ERROR, error=error_text(exc))
        status = answer.status
        location = answer.header(b"location") if 300 <= status <= 399 else None
        retry_after = answer.header(b"retry-after")
        return timer.result(
            status_outcome(status),
            status=status,
            error=status_error(status, answer.reason, location),
            excerpt=response_excerpt(decoded(answer)) if answer.body else None,
            retry_after=parse_retry_after(retry_after, datetime.now(UTC))
            if retry_after is not None else None,
        )

    # -- one request/response on a pooled connection ----------------------------------

    async def _exchange(
        self, req: DeliveryRequest, url: URL, headers: dict[str, str],
        send_by: float | None, deadline: float,
    ) -> Answer:
        """One request and its answer; TimeoutError once the loop's clock passes
        ``deadline`` (waiting for a slot, connecting, or before the answer's head)."""
        scheme = url.scheme
        host = url.raw_host or ""
        port = url.port or DEFAULT_PORTS[scheme]
        key: PoolKey = (req.tenant_id, scheme, host, port)
        data = request_bytes(req.method, url, host, port, headers, req.body)
        if self._slots.locked():
            await _within(self._slots.acquire(), deadline)
        else:
            await self._slots.acquire()
        try:
            connection = self._idle.checkout(key)
            self._in_use += 1
            try:
                if connection is None:
                    connection = await _within(self._connect(scheme, host, port), deadline)
                else:
                    self.stats.reuses += 1
                answer = await self._send(connection, data, req.method, send_by, deadline)
            except RequestNotSent:
                if connection is not None and connection.reusable:
                    self._idle.checkin(key, connection)  # nothing was written on it
                elif connection is not None:
                    connection.abort()
                raise
            except BaseException:
                if connection is not None:
                    connection.abort()  # a cancelled or broken exchange never goes back
                raise
            finally:
                self._in_use -= 1
            if connection.reusable:  # checkout asks the socket before any reuse
                self._idle.checkin(key, connection)
            else:
                connection.abort()
            return answer
        finally:
            self._slots.release()

    async def _send(self, connection: Connection, data: bytes, method: str,
                    send_by: float | None, deadline: float) -> Answer:
        try:
            answer = connection.exchange(data, method, deadline, send_by, self._monotonic)
            if send_by is not None and (now := self._monotonic()) > send_by:
                self._sent_late(now - send_by)
            return await answer
        except ConnectionResetError as exc:
            reader = connection.reader
            if connection.reused and reader is not None and reader.received == 0:
                # The keep-alive race: the receiver closed the idle connection as the
                # request went out. It may have read the request, so it is not resent:
                # the attempt fails and the retry policy decides.
                raise ConnectionResetError(
                    "the receiver closed a reused keep-alive connection without answering;"
                    " the request was not resent (it may have arrived)") from exc
            raise

    def _sent_late(self, seconds: float) -> None:
        self.stats.late_sends += 1
        log.warning("delivery: a request was written %.3f s after its send deadline (the "
                    "process was stopped as it wrote); another replica may deliver the run "
                    "too", seconds)
        if self._on_late_send is not None:
            self._on_late_send()

    async def _connect(self, scheme: str, host: str, port: int) -> Connection:
        """Dial the checked addresses in order; only those (the guard's promise). Keeps
        the sockets open, busy and idle, within ``max_connections``."""
        while self._in_use + len(self._idle) > self._max_connections:
            if not self._idle.evict_oldest():
                break
        try:
            connection = await self._dial(scheme, host, port)
        except OSError as exc:
            if exc.errno not in _OUT_OF_FDS or not self._idle.close_all():
                raise
            # Out of file descriptors: the idle connections are a cache, and a connect
            # that failed sent nothing, so dialling again is not a resend.
            self.stats.fd_retries += 1
            await asyncio.sleep(0)  # the loop closes aborted sockets on its next turn
            log.warning("delivery: out of file descriptors (%s); closed the idle "
                        "connections and dialled again", exc.strerror)
            connection = await self._dial(scheme, host, port)
        self.stats.connects += 1
        return connection

    async def _dial(self, scheme: str, host: str, port: int) -> Connection:
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
                if exc.errno in _OUT_OF_FDS:
                    raise
                last = exc
        raise last or ConnectionError(f"no address to connect to for {host!r}")

    def _tls_context(self) -> ssl.SSLContext:
        if self._tls is None:
            self._tls = ssl.create_default_context()
        return self._tls


async def _within(awaitable: Awaitable[T], deadline: float) -> T:
    """``awaitable`` bounded by ``deadline`` (the loop's clock): the rarer waits of an
    attempt (a pool slot, a new connection) pay for asyncio.wait_for."""
    remaining = deadline - asyncio.get_running_loop().time()
    return await asyncio.wait_for(awaitable, max(0.0, remaining))


