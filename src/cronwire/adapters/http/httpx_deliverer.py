"""The alternative Deliverer: httpx over an httpcore pool whose network backend
connects through the TargetGuard.

httpcore hands ``connect_tcp`` the URL's host; the backend resolves and checks
it once with the guard and dials only a checked address. TLS SNI and the Host
header come from the URL, so they keep the tenant's host name.

Every attempt has a connection of its own (no keep-alive, ADR 0026): httpcore's pool is
keyed by origin alone, so a kept connection would be shared between tenants, and h11
keeps bytes that arrived after an answer for the next one. A fresh connection per
attempt costs a connect and shares nothing. The send window (ADR 0022) is checked by
the network stream right before the request's first byte is written.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import http.cookiejar
import ssl
import time
from collections.abc import AsyncGenerator, Callable, Iterable
from datetime import UTC, datetime
from typing import Any, cast

import httpcore
import httpx

from cronwire.adapters.http.attempt_timer import AttemptTimer
from cronwire.adapters.http.client_tls import TlsContexts
from cronwire.adapters.http.guard import TargetGuard
from cronwire.adapters.http.limits import DRAIN_BYTES, MAX_RESPONSE_BYTES
from cronwire.domain.delivery import (
    EXCERPT_BYTES,
    DeliveryRequest,
    DeliveryResult,
    Outcome,
    delivery_headers,
    error_text,
    parse_retry_after,
    response_excerpt,
    status_error,
    status_outcome,
)
from cronwire.domain.errors import InvalidTarget, RequestNotSent, TargetRefused
from cronwire.domain.netpolicy import validate_target_url
from cronwire.version import user_agent as installed_user_agent

_READ_BYTES = 8 * 1024
# The current attempt's send deadline and its clock, seen by the stream it is written on
# (httpcore runs the request in the caller's task, so a context variable reaches it).
_SEND_WINDOW: contextvars.ContextVar[tuple[float, Callable[[], float]] | None] = (
    contextvars.ContextVar("cronwire_send_window", default=None))
# The current attempt's TLS context when its target has a client certificate (mTLS): the
# stream's handshake uses it instead of the pool's. Connections are never kept (module
# doc), so a connection made with one certificate never serves another request.
_CLIENT_TLS: contextvars.ContextVar[ssl.SSLContext | None] = (
    contextvars.ContextVar("cronwire_client_tls", default=None))


class _AttemptStream(httpcore.AsyncNetworkStream):
    """One attempt's connection: refuses to write the request's first byte past its send
    window, and to read more than MAX_RESPONSE_BYTES. h11 parses whatever one read gave it
    before httpcore reads again (a stream of 100 Continue is thousands of events per
    64 KiB), so reads are small and the loop runs between them: the deadline can fire."""

    def __init__(self, inner: httpcore.AsyncNetworkStream) -> None:
        self._inner = inner
        self._written = False
        self._read = 0

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:  # noqa: ASYNC109
        await asyncio.sleep(0)  # a receiver with bytes always ready still lets the loop run
        data = await self._inner.read(min(max_bytes, _READ_BYTES), timeout)
        self._read += len(data)
        if self._read > MAX_RESPONSE_BYTES:
            raise httpcore.ReadError(f"answer larger than {MAX_RESPONSE_BYTES // 1024} KiB")
        return data

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:  # noqa: ASYNC109
        if not self._written:
            window = _SEND_WINDOW.get()
            if window is not None and window[1]() > window[0]:
                raise RequestNotSent("send window closed before the request was written")
            self._written = True
        await self._inner.write(buffer, timeout)

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def start_tls(self, ssl_context: Any, server_hostname: str | None = None,
                        timeout: float | None = None) -> httpcore.AsyncNetworkStream:  # noqa: ASYNC109
        return await self._inner.start_tls(_CLIENT_TLS.get() or ssl_context, server_hostname,
                                           timeout)

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class GuardedNetworkBackend(httpcore.AsyncNetworkBackend):
    """httpcore backend that dials only addresses the guard resolved and checked."""

    def __init__(self, guard: TargetGuard, inner: httpcore.AsyncNetworkBackend | None = None):
        self._guard = guard
        self._inner = inner or httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's signature
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        try:
            addresses = await self._guard.resolve_checked(host, port)
        except OSError as exc:
            raise httpcore.ConnectError(f"cannot resolve {host!r}: {exc}") from exc
        last_error: Exception | None = None
        for address in addresses:
            try:
                return _AttemptStream(await self._inner.connect_tcp(
                    address, port, timeout, local_address, socket_options
                ))
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                last_error = exc
        assert last_error is not None  # resolve_checked never returns an empty list
        raise last_error

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's signature
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        raise httpcore.ConnectError("unix sockets are not delivery targets")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


class _GuardedTransport(httpx.AsyncHTTPTransport):
    def __init__(self, guard: TargetGuard, max_connections: int,
                 ssl_context: ssl.SSLContext) -> None:
        super().__init__(verify=ssl_context, trust_env=False)
        # httpx has no public knob for the network backend; the pool it would
        # have built is replaced by the same pool with ours. The contract
        # suite's rebinding test fails if an upgrade stops honouring it.
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=ssl_context,
            max_connections=max_connections,
            max_keepalive_connections=0,  # a connection per attempt: see the module doc
            network_backend=GuardedNetworkBackend(guard),
        )


def _no_cookies() -> http.cookiejar.CookieJar:
    """A jar that stores nothing: one tenant's target must not set cookies for another.

    Passed as a CookieJar (httpx adopts it); an httpx.Cookies would be copied
    into a fresh jar that forgets the policy.
    """
    return http.cookiejar.CookieJar(policy=http.cookiejar.DefaultCookiePolicy(allowed_domains=[]))


class HttpxDeliverer:
    """Delivers runs with httpx. ``start()`` before use, ``close()`` after."""

    def __init__(
        self,
        guard: TargetGuard,
        *,
        max_connections: int = 1000,
        user_agent: str | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        trusted_cas: str | None = None,
    ) -> None:
        self._guard = guard
        self._tls = TlsContexts(trusted_cas,
                                base=lambda: httpx.create_ssl_context(trust_env=False))
        # The clock of DeliveryRequest.send_by_monotonic: the executor's Clock.monotonic.
        self._monotonic = monotonic
        self._max_connections = max_connections
        self._user_agent = user_agent or installed_user_agent()
        self._client: httpx.AsyncClient | None = None

    async def start(self) -> None:
        if self._client is None:
            self._client = httpx.AsyncClient(
                transport=_GuardedTransport(self._guard, self._max_connections,
                                            self._tls.plain()),
                follow_redirects=False,
                trust_env=False,
                cookies=_no_cookies(),
            )

    async def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()

    async def deliver(self, req: DeliveryRequest) -> DeliveryResult:
        """One attempt. Never raises for delivery failures; CancelledError propagates."""
        if self._client is None:
            raise RuntimeError("HttpxDeliverer.start() was not called")
        timer = AttemptTimer()

        # httpx timeouts are per phase; the attempt's budget is a total.
        deadline = asyncio.get_running_loop().time() + req.timeout_seconds
        window = (None if req.send_by_monotonic is None
                  else (req.send_by_monotonic, self._monotonic))
        token = _SEND_WINDOW.set(window)
        tls_token = _CLIENT_TLS.set(None)
        try:
            validate_target_url(req.url)
            if req.client_tls is not None:
                _CLIENT_TLS.set(self._tls.for_client(req.client_tls))
            headers = delivery_headers(
                req, int(timer.started_at.timestamp()), user_agent=self._user_agent
            )
            request = self._client.build_request(
                req.method,
                req.url,
                headers=headers,
                content=req.body,
                timeout=httpx.Timeout(req.timeout_seconds),
            )
            async with asyncio.timeout_at(deadline):
                response = await self._client.send(request, stream=True)
            try:
                status = response.status_code
                if not 200 <= status <= 599:  # h11 reads any three digits
                    raise httpx.RemoteProtocolError(f"status {status} is outside 100-599")
                body = await _read_excerpt(response, deadline)
            finally:
                await response.aclose()
            finished_at = datetime.now(UTC)
            return timer.result(
                status_outcome(status),
                status=status,
                error=status_error(
                    status, response.reason_phrase, response.headers.get("location")
                ),
                excerpt=response_excerpt(body) if body else None,
                retry_after=parse_retry_after(response.headers.get("retry-after"), finished_at),
            )
        except RequestNotSent:
            raise
        except (InvalidTarget, TargetRefused) as exc:
            return timer.result(Outcome.BLOCKED, error=error_text(exc))
        except (TimeoutError, httpx.TimeoutException) as exc:
            detail = f"no response within {req.timeout_seconds:g}s"
            return timer.result(Outcome.TIMEOUT, error=error_text(exc, detail))
        except Exception as exc:  # every other failure is a failed attempt
            return timer.result(Outcome.CONNECTION_ERROR, error=error_text(exc))
        finally:
            _CLIENT_TLS.reset(tls_token)
            _SEND_WINDOW.reset(token)


async def _read_excerpt(response: httpx.Response, deadline: float) -> bytes:
    """The first EXCERPT_BYTES of the (decoded) body, reading at most DRAIN_BYTES more.

    A failure or the deadline while reading the body does not change the
    outcome: the status line already decided it.
    """
    data = b""
    chunks = cast(AsyncGenerator[bytes, None], response.aiter_bytes())
    try:
        async with asyncio.timeout_at(deadline), contextlib.aclosing(chunks):
            async for chunk in chunks:
                data += chunk
                if len(data) > EXCERPT_BYTES + DRAIN_BYTES:
                    break
    except (TimeoutError, httpx.HTTPError):
        pass
    return data[:EXCERPT_BYTES]
