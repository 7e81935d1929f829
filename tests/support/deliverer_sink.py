"""The loopback HTTP receiver and the request builder of the Deliverer contract
(tests/contract/test_deliverer_contract.py)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qs, urlsplit
from uuid import UUID

import pytest
from standardwebhooks.webhooks import Webhook

from cronwire.adapters.http.guard import TargetGuard
from cronwire.adapters.http.httpx_deliverer import HttpxDeliverer
from cronwire.adapters.http.lean_deliverer import LeanDeliverer
from cronwire.domain.delivery import (
    DeliveryRequest,
    new_signing_secret,
)
from cronwire.harness.sink import Arrival, Reply
from cronwire.harness.sink import Sink as HarnessSink

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
TEXT = {"Content-Type": "text/plain; charset=utf-8"}


# What the sink recorded of one request: method, path_qs, headers (case-insensitive), body.
Recorded = Arrival


class Sink:
    """The harness sink (cronwire.harness.sink), answering by path: ``/status/N``,
    ``/redirect?to=URL``, ``/retry-after``, ``/set-cookie``, ``/big``, and ``/slow``
    (held until ``release``, at most 10 s; ``slow_cancelled`` says the client hung up)."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        self.release = asyncio.Event()
        self.slow_arrived = asyncio.Event()
        self.slow_cancelled = asyncio.Event()
        self._sink = HarnessSink(behaviour=self._reply, host=host, cancel_on_disconnect=True)

    @property
    def requests(self) -> list[Recorded]:
        return self._sink.arrivals

    @property
    def port(self) -> int:
        return self._sink.port

    def url(self, path: str = "/") -> str:
        return self._sink.url_for(path)

    async def start(self) -> None:
        await self._sink.start()

    async def close(self) -> None:
        self.release.set()
        await self._sink.stop()

    def _reply(self, arrival: Arrival) -> Reply:
        path = arrival.path
        if path.startswith("/status/"):
            code = int(path.rsplit("/", 1)[1])
            return Reply(status=code, body=f"status {code}".encode(), headers=TEXT)
        if path == "/redirect":
            to = parse_qs(urlsplit(arrival.path_qs).query)["to"][0]
            return Reply(status=302, body=b"", headers={"Location": to})
        if path == "/retry-after":
            return Reply(status=429, body=b"", retry_after="7")
        if path == "/set-cookie":
            return Reply(headers={**TEXT, "Set-Cookie": "session=tenant-a; Path=/"})
        if path == "/big":
            return Reply(body=BIG_BODY, headers={"Content-Type": "text/plain"})
        if path == "/slow":
            self.slow_arrived.set()
            return Reply(hold=self.release, hold_seconds=10, on_cancel=self.slow_cancelled.set,
                         headers=TEXT)
        return Reply(headers=TEXT)


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
