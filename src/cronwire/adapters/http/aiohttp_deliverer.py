"""A Deliverer on one pooled aiohttp session, connecting through the TargetGuard
(``SCHEDULER_DELIVERER=aiohttp``; the default is ``lean``, ADR 0012).

The guard is aiohttp's resolver, so the connector dials only addresses the
guard resolved and checked; the URL is never rewritten, so the Host header and
TLS SNI keep the tenant's host name. aiohttp short-circuits its resolver for
IP literals, so those are checked here before the request.
"""

from __future__ import annotations

import functools
import socket
from datetime import UTC, datetime

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult

from cronwire.adapters.http.attempt_timer import AttemptTimer
from cronwire.adapters.http.guard import TargetGuard
from cronwire.adapters.http.target_url import parse_target
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
from cronwire.domain.errors import InvalidTarget, TargetRefused

# Read this much past the excerpt so a keep-alive connection can be reused;
# a longer body costs a closed connection instead of unbounded reading.
DRAIN_BYTES = 64 * 1024


class GuardResolver(AbstractResolver):
    """aiohttp resolver answering only with addresses the guard has checked."""

    def __init__(self, guard: TargetGuard) -> None:
        self._guard = guard

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        addresses = await self._guard.resolve_checked(host, port)
        return [
            ResolveResult(
                hostname=host,
                host=address,
                port=port,
                family=socket.AF_INET6 if ":" in address else socket.AF_INET,
                proto=0,
                flags=socket.AI_NUMERICHOST | socket.AI_NUMERICSERV,
            )
            for address in addresses
        ]

    async def close(self) -> None:
        return None


class AiohttpDeliverer:
    """Delivers runs with aiohttp. ``start()`` before use, ``close()`` after."""

    def __init__(
        self,
        guard: TargetGuard,
        *,
        max_connections: int = 1000,
        user_agent: str | None = None,
    ) -> None:
        self._guard = guard
        self._max_connections = max_connections
        self._user_agent = user_agent or default_user_agent()
        self._session: aiohttp.ClientSession | None = None

    async def start(self) -> None:
        if self._session is not None:
            return
        connector = aiohttp.TCPConnector(
            resolver=GuardResolver(self._guard),
            use_dns_cache=False,  # every new connection is a fresh, checked resolution
            limit=self._max_connections,
        )
        self._session = aiohttp.ClientSession(
            connector=connector,
            cookie_jar=aiohttp.DummyCookieJar(),  # tenants must never share cookies
            trust_env=False,  # an environment proxy would dial unchecked addresses
            auto_decompress=True,
        )

    async def close(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            await session.close()

    async def deliver(self, req: DeliveryRequest) -> DeliveryResult:
        """One attempt. Never raises for delivery failures; CancelledError propagates."""
        if self._session is None:
            raise RuntimeError("AiohttpDeliverer.start() was not called")
        timer = AttemptTimer()

        try:
            url, literal_port = parse_target(req.url)
            headers = delivery_headers(
                req, int(timer.started_at.timestamp()), user_agent=self._user_agent
            )
            if literal_port is not None:
                # aiohttp dials IP literals without asking its resolver; check them here.
                await self._guard.resolve_checked(url.raw_host or "", literal_port)
            async with self._session.request(
                req.method,
                url,
                headers=headers,
                data=req.body,
                allow_redirects=False,
                timeout=_timeout(req.timeout_seconds),
            ) as response:
                body = await _read_excerpt(response)
                finished_at = datetime.now(UTC)
                status = response.status
                return timer.result(
                    status_outcome(status),
                    status=status,
                    error=status_error(status, response.reason, response.headers.get("location")),
                    excerpt=response_excerpt(body) if body else None,
                    retry_after=parse_retry_after(response.headers.get("retry-after"), finished_at),
                )
        except (InvalidTarget, TargetRefused) as exc:
            return timer.result(Outcome.BLOCKED, error=error_text(exc))
        except TimeoutError as exc:
            detail = f"no complete response within {req.timeout_seconds:g}s"
            return timer.result(Outcome.TIMEOUT, error=error_text(exc, detail))
        except Exception as exc:  # every other failure is a failed attempt
            return timer.result(Outcome.CONNECTION_ERROR, error=error_text(exc))



# Many runs share a target URL, so its pure parsing and validation are done once per URL
# (they were ~6% of an executor's CPU); the address policy itself is still applied to every
# request through the guard.
@functools.lru_cache(maxsize=8192)
@functools.lru_cache(maxsize=64)
def _timeout(seconds: float) -> aiohttp.ClientTimeout:
    return aiohttp.ClientTimeout(total=seconds)


async def _read_excerpt(response: aiohttp.ClientResponse) -> bytes:
    """The first EXCERPT_BYTES of the body; the rest drained or the connection dropped.

    A failure while reading the body does not change the outcome: the status
    line already decided it.
    """
    data = b""
    try:
        while len(data) < EXCERPT_BYTES:
            chunk = await response.content.read(EXCERPT_BYTES - len(data))
            if not chunk:
                return data
            data += chunk
        drained = 0
        while drained <= DRAIN_BYTES:
            chunk = await response.content.read(DRAIN_BYTES)
            if not chunk:
                return data
            drained += len(chunk)
        response.close()  # too long to drain: give the connection up
    except (aiohttp.ClientError, OSError):
        response.close()
    return data
