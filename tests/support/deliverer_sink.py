"""The loopback HTTP receiver and the request builder of the Deliverer contract
(tests/contract/test_deliverer_contract.py)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

import pytest
from aiohttp import web
from multidict import CIMultiDict
from standardwebhooks.webhooks import Webhook

from cronwire.adapters.http.guard import TargetGuard
from cronwire.adapters.http.httpx_deliverer import HttpxDeliverer
from cronwire.adapters.http.lean_deliverer import LeanDeliverer
from cronwire.domain.delivery import (
    DeliveryRequest,
    new_signing_secret,
)

Deliverer = HttpxDeliverer | LeanDeliverer
ADAPTERS = {"httpx": HttpxDeliverer, "lean": LeanDeliverer}
TENANT_A = UUID("00000000-0000-4000-8000-00000000000a")
TENANT_B = UUID("00000000-0000-4000-8000-00000000000b")


@pytest.fixture(name="deliverer", params=sorted(ADAPTERS))
async def deliverer_fixture(request: pytest.FixtureRequest) -> AsyncIterator[Deliverer]:
    """``deliverer``: each Deliverer adapter in turn, started. Import it into a test module
    with ``from tests.support.deliverer_sink import deliverer_fixture  # noqa: F401``."""
    adapter = ADAPTERS[request.param](TargetGuard(allow_private=True))
    await adapter.start()
    yield adapter
    await adapter.close()


SCHEDULED_FOR = datetime(2027, 3, 28, 1, 0, tzinfo=UTC)
BIG_BODY = ("a" * 1023 + "é" * 2100).encode()  # 5 KiB; byte 1024 falls inside an "é"


@dataclass
class Recorded:
    method: str
    path_qs: str
    headers: CIMultiDict[str]
    body: bytes


@dataclass
class Sink:
    """An aiohttp.web server that records every request and answers by path."""

    host: str = "127.0.0.1"
    requests: list[Recorded] = field(default_factory=list)
    release: asyncio.Event = field(default_factory=asyncio.Event)
    slow_arrived: asyncio.Event = field(default_factory=asyncio.Event)
    slow_cancelled: asyncio.Event = field(default_factory=asyncio.Event)
    port: int = 0
    _runner: web.AppRunner | None = None

    def url(self, path: str = "/") -> str:
        return f"http://{self.host}:{self.port}{path}"

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        self.requests.append(
            Recorded(request.method, request.path_qs, CIMultiDict(request.headers), body)
        )
        path = request.path
        if path.startswith("/status/"):
            code = int(path.rsplit("/", 1)[1])
            return web.Response(status=code, text=f"status {code}")
        if path == "/redirect":
            return web.Response(status=302, headers={"Location": request.query["to"]})
        if path == "/retry-after":
            return web.Response(status=429, headers={"Retry-After": "7"})
        if path == "/set-cookie":
            return web.Response(text="ok", headers={"Set-Cookie": "session=tenant-a; Path=/"})
        if path == "/big":
            return web.Response(body=BIG_BODY, content_type="text/plain")
        if path == "/slow":
            self.slow_arrived.set()
            try:
                await asyncio.wait_for(self.release.wait(), timeout=10)
            except asyncio.CancelledError:
                self.slow_cancelled.set()  # the client hung up
                raise
            except TimeoutError:
                pass
        return web.Response(text="ok")

    async def start(self) -> None:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(
            app, handler_cancellation=True, shutdown_timeout=2.0, access_log=None
        )
        await self._runner.setup()
        await web.TCPSite(self._runner, self.host, self.port).start()
        self.port = self._runner.addresses[0][1]

    async def close(self) -> None:
        self.release.set()
        if self._runner is not None:
            await self._runner.cleanup()

def make_request(url: str, **changes: Any) -> DeliveryRequest:
    fields: dict[str, Any] = {
        "run_id": UUID("00000000-0000-4000-8000-000000000001"),
        "schedule_id": UUID("00000000-0000-4000-8000-000000000002"),
        "tenant_id": TENANT_A,
        "idempotency_key": "run-00000000-0000-4000-8000-000000000001",
        "scheduled_for": SCHEDULED_FOR,
        "attempt": 1,
        "method": "POST",
        "url": url,
        "headers": {},
        "body": b'{"k": 1}',
        "signing_secrets": (SECRET,),
        "timeout_seconds": 5.0,
    }
    fields.update(changes)
    return DeliveryRequest(**fields)


SECRET = new_signing_secret()
NEW_SECRET = new_signing_secret()


def verify(secret: str, recorded: Recorded) -> None:
    Webhook(secret).verify(recorded.body, dict(recorded.headers), json_parse=False)
