"""TargetGuard with injected resolvers, and both deliverers connecting through it.

Everything stays on loopback: "public" and "private" are played by loopback
addresses through an injected ``is_forbidden``, and an autouse jail refuses
(and fails the test for) any connection to a non-loopback address.
"""

from __future__ import annotations

import asyncio
import errno
import socket
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from ipaddress import IPv4Address, ip_address
from typing import Any
from uuid import uuid4

import pytest
from aiohttp import web

from cronwire.adapters.http.guard import TargetGuard
from cronwire.adapters.http.httpx_deliverer import HttpxDeliverer
from cronwire.adapters.http.lean_deliverer import LeanDeliverer
from cronwire.domain.delivery import DeliveryRequest, Outcome, new_signing_secret
from cronwire.domain.errors import InvalidTarget, TargetRefused
from cronwire.domain.netpolicy import IPAddress, forbidden_reason

ADAPTERS = {"httpx": HttpxDeliverer, "lean": LeanDeliverer}


class FakeResolver:
    """Answers from a script: one list per call, the last one repeated."""

    def __init__(self, *answers: list[str]) -> None:
        self.answers = list(answers)
        self.calls: list[tuple[str, int]] = []

    async def __call__(self, host: str, port: int) -> list[str]:
        self.calls.append((host, port))
        return self.answers[min(len(self.calls), len(self.answers)) - 1]


async def unresolvable(host: str, port: int) -> list[str]:
    raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")


async def must_not_resolve(host: str, port: int) -> list[str]:
    raise AssertionError(f"{host} should have been judged without DNS")


class RecordingSink:
    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.hosts_seen: list[str] = []
        self._runner: web.AppRunner | None = None

    async def _handle(self, request: web.Request) -> web.Response:
        self.hosts_seen.append(request.headers.get("Host", ""))
        return web.Response(text=f"hello from {self.host}")

    async def start(self) -> None:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, shutdown_timeout=2.0, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, self.host, self.port).start()
        self.port = self._runner.addresses[0][1]

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()


@pytest.fixture(autouse=True)
async def loopback_only(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[list[Any]]:
    loop = asyncio.get_running_loop()
    connects: list[Any] = []
    original = loop.sock_connect

    async def sock_connect(sock: socket.socket, address: Any) -> None:
        connects.append(address)
        if not ip_address(str(address[0]).split("%")[0]).is_loopback:
            raise AssertionError(f"test jail: {address} is not loopback")
        await original(sock, address)

    monkeypatch.setattr(loop, "sock_connect", sock_connect)
    yield connects
    assert all(ip_address(str(a[0])).is_loopback for a in connects)


@pytest.fixture
async def rebinding_sinks() -> AsyncIterator[tuple[RecordingSink, RecordingSink]]:
    """Sinks on 127.0.0.2 ("public") and 127.0.0.3 ("internal"), same port."""
    for _ in range(10):
        public = RecordingSink("127.0.0.2", 0)
        await public.start()
        internal = RecordingSink("127.0.0.3", public.port)
        try:
            await internal.start()
        except OSError as exc:
            await public.close()
            await internal.close()
            if exc.errno != errno.EADDRINUSE:
                raise
            continue
        yield public, internal
        await internal.close()
        await public.close()
        return
    pytest.fail("no port free on both 127.0.0.2 and 127.0.0.3")


def only_127_0_0_2_is_public(ip: IPAddress) -> str | None:
    return None if ip == IPv4Address("127.0.0.2") else forbidden_reason(ip)


def request_to(url: str) -> DeliveryRequest:
    return DeliveryRequest(
        run_id=uuid4(),
        schedule_id=uuid4(),
        tenant_id=uuid4(),
        idempotency_key="k",
        attempt=1,
        method="POST",
        scheduled_for=datetime(2027, 1, 1, tzinfo=UTC),
        url=url,
        headers={},
        body=b"{}",
        signing_secrets=(new_signing_secret(),),
        timeout_seconds=5.0,
    )


async def test_name_resolving_to_a_private_address_is_refused() -> None:
    guard = TargetGuard(allow_private=False, resolve=FakeResolver(["10.0.0.5"]))
    with pytest.raises(TargetRefused, match=r"'internal\.test'.*10\.0\.0\.5.*private"):
        await guard.resolve_checked("internal.test", 443)
    with pytest.raises(TargetRefused, match="private"):
        await guard.check_url("https://internal.test/hook")


async def test_a_refusal_names_the_setting_that_allows_it_and_why_it_is_off() -> None:
    """The README's first schedule once met a bare "loopback" refusal."""
    guard = TargetGuard(allow_private=False, resolve=FakeResolver(["127.0.0.1"]))
    with pytest.raises(TargetRefused) as refused:
        await guard.check_url("http://127.0.0.1:8080/healthz")
    message = str(refused.value)
    assert message.startswith("target.url: host '127.0.0.1' resolves to 127.0.0.1, loopback")
    assert "SCHEDULER_ALLOW_PRIVATE_TARGETS=true" in message
    assert "cannot reach the network it runs in" in message  # why it is off by default


@pytest.mark.parametrize(
    "answers",
    [
        ["93.184.216.34", "10.0.0.5"],
        ["2606:4700:4700::1111", "::ffff:169.254.169.254"],
        ["8.8.8.8", "fd00::1"],
    ],
)
async def test_one_forbidden_address_among_several_refuses_the_host(answers: list[str]) -> None:
    guard = TargetGuard(allow_private=False, resolve=FakeResolver(answers))
    with pytest.raises(TargetRefused, match=r"mixed\.test"):
        await guard.resolve_checked("mixed.test", 80)


async def test_public_addresses_are_returned_as_checked() -> None:
    resolver = FakeResolver(["93.184.216.34", "2606:4700:4700::1111", "93.184.216.34"])
    guard = TargetGuard(allow_private=False, resolve=resolver)
    assert await guard.resolve_checked("example.test", 443) == [
        "93.184.216.34",
        "2606:4700:4700::1111",
    ]
    await guard.check_url("https://example.test/hook")
    assert resolver.calls == [("example.test", 443), ("example.test", 443)]


async def test_allow_private_refuses_nothing() -> None:
    guard = TargetGuard(allow_private=True, resolve=FakeResolver(["127.0.0.1", "10.0.0.5"]))
    assert await guard.resolve_checked("dev.test", 80) == ["127.0.0.1", "10.0.0.5"]
    await guard.check_url("http://127.0.0.1:8080/hook")
    await TargetGuard(allow_private=True, resolve=unresolvable).check_url("http://later.test/")


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1/",
        "http://0x7f.1/",
        "http://2130706433/",
        "http://[::ffff:127.0.0.1]/",
        "http://169.254.169.254/",
        "http://[fd00::1]:8080/",
    ],
)
async def test_literal_addresses_are_checked_without_dns(url: str) -> None:
    guard = TargetGuard(allow_private=False, resolve=must_not_resolve)
    with pytest.raises(TargetRefused, match=r"^target\.url: "):
        await guard.check_url(url)


async def test_public_literal_needs_no_dns() -> None:
    guard = TargetGuard(allow_private=False, resolve=must_not_resolve)
    await guard.check_url("https://93.184.216.34/hook")
    assert await guard.resolve_checked("0x5db8d822", 443) == ["93.184.216.34"]


async def test_names_that_do_not_resolve_are_refused_at_create_time() -> None:
    for resolve in (unresolvable, FakeResolver([])):
        guard = TargetGuard(allow_private=False, resolve=resolve)
        with pytest.raises(TargetRefused, match="does not resolve"):
            await guard.check_url("https://nowhere.test/hook")


async def test_slow_resolution_is_bounded_at_create_time() -> None:
    async def hang(host: str, port: int) -> list[str]:
        await asyncio.sleep(10)
        return []

    guard = TargetGuard(allow_private=False, resolve=hang, create_time_resolve_timeout=0.05)
    with pytest.raises(TargetRefused, match="does not resolve"):
        await asyncio.wait_for(guard.check_url("https://slow.test/"), timeout=5)


async def test_malformed_urls_are_invalid_not_refused() -> None:
    guard = TargetGuard(allow_private=False, resolve=must_not_resolve)
    with pytest.raises(InvalidTarget, match="scheme"):
        await guard.check_url("gopher://example.test/")


@pytest.mark.parametrize("adapter", sorted(ADAPTERS))
async def test_rebinding_after_the_check_cannot_redirect_the_connection(
    adapter: str, rebinding_sinks: tuple[RecordingSink, RecordingSink]
) -> None:
    public, internal = rebinding_sinks
    resolver = FakeResolver(["127.0.0.2"], ["127.0.0.3"])
    guard = TargetGuard(
        allow_private=False, resolve=resolver, is_forbidden=only_127_0_0_2_is_public
    )
    url = f"http://rebind.test:{public.port}/hook"
    first = ADAPTERS[adapter](guard)
    await first.start()
    try:
        result = await first.deliver(request_to(url))
    finally:
        await first.close()
    assert (result.outcome, result.response_excerpt) == (Outcome.SUCCESS, "hello from 127.0.0.2")
    assert public.hosts_seen == [f"rebind.test:{public.port}"]
    assert resolver.calls == [("rebind.test", public.port)]  # checked once, never re-resolved

    second = ADAPTERS[adapter](guard)  # a new connection decision: DNS now says 127.0.0.3
    await second.start()
    try:
        blocked = await second.deliver(request_to(url))
    finally:
        await second.close()
    assert blocked.outcome is Outcome.BLOCKED
    assert blocked.error is not None and "127.0.0.3" in blocked.error
    assert len(resolver.calls) == 2
    assert internal.hosts_seen == []


@pytest.mark.parametrize("adapter", sorted(ADAPTERS))
async def test_name_resolving_to_a_forbidden_address_is_blocked_without_connecting(
    adapter: str, loopback_only: list[Any]
) -> None:
    sink = RecordingSink("127.0.0.1", 0)
    await sink.start()
    deliverer = ADAPTERS[adapter](TargetGuard(False, resolve=FakeResolver(["127.0.0.1"])))
    await deliverer.start()
    try:
        result = await deliverer.deliver(request_to(f"http://sneaky.test:{sink.port}/"))
    finally:
        await deliverer.close()
        await sink.close()
    assert (result.outcome, result.status_code, result.retryable) == (Outcome.BLOCKED, None, False)
    assert result.error is not None and result.error.startswith("TargetRefused: ")
    assert "loopback" in result.error and "sneaky.test" in result.error
    assert sink.hosts_seen == [] and loopback_only == []


@pytest.mark.parametrize("adapter", sorted(ADAPTERS))
async def test_dns_failure_at_delivery_is_a_retryable_connection_error(adapter: str) -> None:
    deliverer = ADAPTERS[adapter](TargetGuard(False, resolve=unresolvable))
    await deliverer.start()
    try:
        result = await deliverer.deliver(request_to("http://gone.test/"))
    finally:
        await deliverer.close()
    assert (result.outcome, result.retryable) == (Outcome.CONNECTION_ERROR, True)
