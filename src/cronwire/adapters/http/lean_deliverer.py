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
for and with the same TLS context (a client certificate's, for mTLS, or the plain one).
The Host header and TLS SNI keep the tenant's host name.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import time
from collections.abc import Callable
from functools import partial

from yarl import URL

from cronwire.adapters.http.attempt_outcome import (
    abandon_exchange,
    answered_result,
    failed_result,
    reset_explained,
)
from cronwire.adapters.http.attempt_timer import AttemptTimer
from cronwire.adapters.http.client_tls import TlsContexts
from cronwire.adapters.http.connection_pool import IdlePool, PoolKey, PoolStats
from cronwire.adapters.http.dial import OUT_OF_FDS, Dialer
from cronwire.adapters.http.guard import TargetGuard
from cronwire.adapters.http.http1 import Connection, request_bytes
from cronwire.adapters.http.response_reader import Answer
from cronwire.adapters.http.slots import Slots, within
from cronwire.adapters.http.target_url import parse_target
from cronwire.domain.delivery import (
    DeliveryRequest,
    DeliveryResult,
    delivery_headers,
)
from cronwire.domain.errors import RequestNotSent
from cronwire.domain.netpolicy import DEFAULT_PORTS
from cronwire.version import user_agent as installed_user_agent

log = logging.getLogger(__name__)

IDLE_SECONDS = 4.0  # below common server keep-alive timeouts (uvicorn 5 s, nginx 75 s)
REAP_SECONDS = 1.0  # how often idle connections past IDLE_SECONDS are closed


class LeanDeliverer:
    """Delivers runs over pooled HTTP/1.1 connections. ``start()`` before use.

    At most ``max_connections`` sockets are open at once, busy and idle together; idle
    ones are capped at ``max_idle_per_key`` per (tenant, origin) and ``max_connections``
    in all, and closed after IDLE_SECONDS."""

    def __init__(
        self, guard: TargetGuard, *, max_connections: int = 1000,
        max_idle_per_key: int | None = None, user_agent: str | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        on_late_send: Callable[[], None] | None = None, trusted_cas: str | None = None,
    ) -> None:
        self._dialer = Dialer(guard)
        self._tls = TlsContexts(trusted_cas)
        self._on_late_send = on_late_send
        # The clock of DeliveryRequest.send_by_monotonic: the executor's Clock.monotonic.
        self._monotonic = monotonic
        self._user_agent = user_agent or installed_user_agent()
        self._max_connections = max(1, max_connections)
        self._slots = Slots(self._max_connections)
        self._in_use = 0  # sockets open or opening outside the idle pool
        self._idle = IdlePool(
            per_key=max_idle_per_key or self._max_connections,
            total=self._max_connections, idle_seconds=IDLE_SECONDS)
        self.stats = PoolStats()
        self._reaper: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def idle_connections(self) -> int:
        return len(self._idle)

    async def start(self) -> None:
        if self._reaper is None:
            self._loop = asyncio.get_running_loop()  # asked once, not per delivery (getpid)
            self._reaper = asyncio.create_task(self._idle.reap_every(REAP_SECONDS),
                                               name="lean-deliverer-reaper")

    async def close(self) -> None:
        reaper, self._reaper = self._reaper, None
        self._loop = None
        if reaper is not None:
            reaper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reaper
        self._idle.close_all()

    async def deliver(self, req: DeliveryRequest) -> DeliveryResult:
        """One attempt. Never raises for delivery failures; CancelledError propagates."""
        loop = self._loop
        if self._reaper is None or loop is None:
            raise RuntimeError("LeanDeliverer.start() was not called")
        started = self.begin(req)
        if started is not None:
            return await started
        timer = AttemptTimer()
        try:
            # An IP literal needs no check of its own here: every new connection, literal
            # or name, is dialled through the guard.
            url, _literal_port = parse_target(req.url)
            headers = delivery_headers(
                req, int(timer.started_at.timestamp()), user_agent=self._user_agent)
            deadline = loop.time() + req.timeout_seconds
            answer = await self._exchange(req, url, headers, req.send_by_monotonic, deadline)
        except RequestNotSent:
            raise
        except Exception as exc:  # every other failure is a failed attempt
            return failed_result(timer, exc, req)
        return answered_result(timer, answer)

    def begin(self, req: DeliveryRequest) -> asyncio.Future[DeliveryResult] | None:
        """:meth:`deliver` without a task or a coroutine, where no wait is needed: with a
        slot free and a parked connection of the request's tenant and origin, the request
        is written before this returns, and the connection's own callbacks complete the
        future (docs/benchmarks.md#levers: a task and five coroutine frames per delivery cost the burst's
        replica about a tenth of its CPU). None when a slot or a new connection must be
        waited for (:meth:`deliver` does that) or the request cannot be built (deliver
        reports why). Cancelling the future abandons the exchange and closes its
        connection, as cancelling deliver does; RequestNotSent, with nothing written, as
        from deliver."""
        loop = self._loop
        if loop is None or self._slots.locked():
            return None
        try:
            url, _literal_port = parse_target(req.url)
            scheme = url.scheme
            host = url.raw_host or ""
            port = url.port or DEFAULT_PORTS[scheme]
            timer = AttemptTimer()
            headers = delivery_headers(
                req, int(timer.started_at.timestamp()), user_agent=self._user_agent)
            data = request_bytes(req.method, url, host, port, headers, req.body)
            tls = self._tls.for_client(req.client_tls)
        except Exception:
            return None
        key: PoolKey = (req.tenant_id, scheme, host, port, tls)
        connection = self._idle.checkout(key)
        if connection is None or not self._slots.try_take():
            if connection is not None:
                self._idle.checkin(key, connection)
            return None
        self._in_use += 1
        self.stats.reuses += 1
        send_by = req.send_by_monotonic
        try:
            waiter = connection.exchange(data, req.method, loop.time() + req.timeout_seconds,
                                         send_by, self._monotonic)
        except RequestNotSent:
            self._end_exchange(key, connection)  # nothing was written on it
            raise
        except Exception as exc:  # it may have been written: failed, never resent
            connection.abort()
            self._end_exchange(key, connection)
            failed: asyncio.Future[DeliveryResult] = loop.create_future()
            failed.set_result(failed_result(timer, exc, req))
            return failed
        if send_by is not None and (now := self._monotonic()) > send_by:
            self._sent_late(now - send_by)
        result: asyncio.Future[DeliveryResult] = loop.create_future()
        waiter.add_done_callback(partial(self._exchanged, result, key, connection, timer, req))
        result.add_done_callback(partial(abandon_exchange, waiter))
        return result

    def _exchanged(self, result: asyncio.Future[DeliveryResult], key: PoolKey,
                   connection: Connection, timer: AttemptTimer, req: DeliveryRequest,
                   waiter: asyncio.Future[Answer]) -> None:
        """The end of :meth:`begin`'s exchange: the connection goes back or is closed,
        the slot is freed, and the future gets the attempt's result."""
        if result.done() or waiter.cancelled():  # abandoned
            connection.abort()
            self._end_exchange(key, connection)
            return
        exc = waiter.exception()
        if exc is not None:
            if isinstance(exc, ConnectionResetError):
                exc = reset_explained(connection, exc)
            connection.abort()
            self._end_exchange(key, connection)
            result.set_result(failed_result(timer, exc, req))
            return
        self._end_exchange(key, connection)
        result.set_result(answered_result(timer, waiter.result()))

    def _end_exchange(self, key: PoolKey, connection: Connection) -> None:
        self._in_use -= 1
        self._slots.give()
        if connection.reusable:
            self._idle.checkin(key, connection)
        else:
            connection.abort()

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
        tls = self._tls.for_client(req.client_tls)
        key: PoolKey = (req.tenant_id, scheme, host, port, tls)
        data = request_bytes(req.method, url, host, port, headers, req.body)
        if self._slots.locked():
            await within(self._slots.take(), deadline)
        else:
            await self._slots.take()
        try:
            connection = self._idle.checkout(key)
            self._in_use += 1
            try:
                if connection is None:
                    connection = await within(self._connect(scheme, host, port, tls), deadline)
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
            self._slots.give()

    async def _send(self, connection: Connection, data: bytes, method: str,
                    send_by: float | None, deadline: float) -> Answer:
        try:
            answer = connection.exchange(data, method, deadline, send_by, self._monotonic)
            if send_by is not None and (now := self._monotonic()) > send_by:
                self._sent_late(now - send_by)
            return await answer
        except ConnectionResetError as exc:
            explained = reset_explained(connection, exc)
            if explained is exc:
                raise
            raise explained from exc

    def _sent_late(self, seconds: float) -> None:
        self.stats.late_sends += 1
        log.warning("delivery: a request was written %.3f s after its send deadline (the process"
                    " was stopped as it wrote); another replica may deliver the run too", seconds)
        if self._on_late_send is not None:
            self._on_late_send()

    async def _connect(self, scheme: str, host: str, port: int, tls: ssl.SSLContext
                       ) -> Connection:
        """Dial the checked addresses in order; only those (the guard's promise). Keeps
        the sockets open, busy and idle, within ``max_connections``."""
        while self._in_use + len(self._idle) > self._max_connections:
            if not self._idle.evict_oldest():
                break
        try:
            connection = await self._dialer.dial(scheme, host, port, tls)
        except OSError as exc:
            if exc.errno not in OUT_OF_FDS or not self._idle.close_all():
                raise
            # Out of file descriptors: the idle connections are a cache, and a connect
            # that failed sent nothing, so dialling again is not a resend.
            self.stats.fd_retries += 1
            await asyncio.sleep(0)  # the loop closes aborted sockets on its next turn
            log.warning("delivery: out of file descriptors (%s); closed the idle "
                        "connections and dialled again", exc.strerror)
            connection = await self._dialer.dial(scheme, host, port, tls)
        self.stats.connects += 1
        return connection

