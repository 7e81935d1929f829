"""A replica without the api role serves /healthz, /readyz and /metrics from a bare ASGI
application (api/ops_app.py), so that it never imports FastAPI. Whoever probes or scrapes
it must not see a difference: every request here is sent to that application and to the
API's FastAPI application, and the answers must be the same, byte for byte."""

from __future__ import annotations

import httpx
import pytest

from cronwire.api.app import create_app
from cronwire.api.ops_app import OpsApp

EXPOSITION = b"# HELP cronwire_up 1\n# TYPE cronwire_up gauge\ncronwire_up 1.0\n"
COMPARED_HEADERS = ("content-type", "content-length", "allow", "x-request-id")
REQUESTS = [
    ("GET", "/healthz"), ("GET", "/readyz"), ("GET", "/metrics"), ("GET", "/healthz?probe=1"),
    ("GET", "/nothing-here"), ("GET", "/"), ("GET", "/readyz/extra"),
    ("POST", "/healthz"), ("PUT", "/readyz"), ("DELETE", "/metrics"), ("HEAD", "/healthz"),
    ("POST", "/nothing-here"),
]


def readiness_of(checks: dict[str, bool] | Exception):
    async def readiness() -> dict[str, bool]:
        if isinstance(checks, Exception):
            raise checks
        return dict(checks)
    return readiness


async def answers(app: object, method: str, path: str) -> tuple[int, dict[str, str], bytes]:
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)  # type: ignore[arg-type]
    async with httpx.AsyncClient(transport=transport, base_url="http://replica") as client:
        response = await client.request(method, path, headers={"x-request-id": "probe-1"})
    headers = {name: response.headers[name] for name in COMPARED_HEADERS
               if name in response.headers}
    return response.status_code, headers, response.content


@pytest.mark.parametrize("checks", [
    {"database": True, "loop:executor": True},
    {"database": False, "loop:executor": True, "loop:alerts": False},
    RuntimeError("the readiness check itself failed"),
], ids=["ready", "not-ready", "readiness-raises"])
@pytest.mark.parametrize(("method", "path"), REQUESTS, ids=[" ".join(r) for r in REQUESTS])
async def test_the_bare_operations_app_answers_as_the_fastapi_app_does(
    checks: dict[str, bool] | Exception, method: str, path: str,
) -> None:
    readiness = readiness_of(checks)
    bare = await answers(OpsApp(readiness, lambda: EXPOSITION), method, path)
    full = await answers(create_app(readiness, lambda: EXPOSITION, []), method, path)
    assert bare == full


async def test_the_answers_compared_are_the_ones_a_probe_relies_on() -> None:
    """The comparison above would pass for two equally broken applications: pin what the
    answers are."""
    app = OpsApp(readiness_of({"database": True, "kafka": False}), lambda: EXPOSITION)
    status, _, body = await answers(app, "GET", "/healthz")
    assert (status, body) == (200, b'{"status":"ok"}')
    status, _, body = await answers(app, "GET", "/readyz")
    assert status == 503
    assert body == (b'{"status":"not ready","checks":{"database":true,"kafka":false},'
                    b'"failing":["kafka"]}')
    status, headers, body = await answers(app, "GET", "/metrics")
    assert (status, body) == (200, EXPOSITION)
    assert headers["content-type"].startswith("text/plain; version=")  # Prometheus text
    status, headers, body = await answers(app, "POST", "/healthz")
    assert (status, headers["allow"]) == (405, "GET")
    assert body == (b'{"error":{"code":"method_not_allowed","message":"Method Not Allowed",'
                    b'"field":null,"limit":null}}')
    status, _, body = await answers(app, "GET", "/nope")
    assert status == 404 and body.startswith(b'{"error":{"code":"not_found"')


async def test_a_websocket_is_refused() -> None:
    sent: list[dict[str, object]] = []

    async def send(message: dict[str, object]) -> None:
        sent.append(message)

    await OpsApp(readiness_of({}), lambda: b"")({"type": "websocket", "path": "/healthz"},
                                               None, send)
    assert sent == [{"type": "websocket.close", "code": 1000}]
