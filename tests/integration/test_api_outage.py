"""A real Postgres outage: every authenticated route answers 503 with Retry-After (the
token lookup included), never 500, and the same requests work again once it is back.

The server is a throwaway embedded cluster of this test's own, stopped and started with
its pg_ctl; the session's shared server is never touched."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest

from cronwire.adapters.embedded.postgres import FAST_UNSAFE_SETTINGS, EmbeddedPostgres
from cronwire.adapters.postgres.migrator import migrate
from cronwire.adapters.postgres.pool import create_pool
from cronwire.adapters.postgres.tenants import PostgresTenantStore
from tests.support.api import api_context, asgi_client, schedule_body

pytestmark = pytest.mark.asyncio


@pytest.fixture
def own_server(server_dir: Path) -> Iterator[EmbeddedPostgres]:
    server = EmbeddedPostgres(server_dir / "pg", settings=dict(FAST_UNSAFE_SETTINGS))
    server.start()
    try:
        yield server
    finally:
        if server.running_port() is not None:
            server.started_here = True
            server.stop()


def routes(schedule_id: str, run_id: str) -> list[tuple[str, str, dict[str, object] | None]]:
    one = f"/v1/schedules/{schedule_id}"
    return [
        ("POST", "/v1/schedules", schedule_body()),
        ("GET", "/v1/schedules", None),
        ("GET", one, None),
        ("PATCH", one, {"name": "renamed"}),
        ("POST", f"{one}/pause", None),
        ("POST", f"{one}/resume", None),
        ("POST", f"{one}/trigger", None),
        ("GET", f"{one}/preview", None),
        ("POST", f"{one}/rotate-secret", None),
        ("GET", "/v1/runs", None),
        ("GET", f"/v1/runs/{run_id}", None),
        ("DELETE", one, None),
    ]


@pytest.fixture
async def client_on(own_server: EmbeddedPostgres) -> AsyncIterator[tuple[httpx.AsyncClient, str]]:
    await migrate(own_server.dsn)
    pool = await create_pool(own_server.dsn, 4, timeout=5)
    token = (await PostgresTenantStore(pool).create("outage")).token
    try:
        async with asgi_client(api_context(pool)) as client:
            yield client, token
    finally:
        await asyncio.wait_for(pool.close(), 10)


async def test_every_authenticated_route_answers_503_during_an_outage_and_recovers(
    own_server: EmbeddedPostgres, client_on: tuple[httpx.AsyncClient, str]
) -> None:
    client, token = client_on
    auth = {"Authorization": f"Bearer {token}"}
    created = await client.post("/v1/schedules", json=schedule_body(), headers=auth)
    assert created.status_code == 201, created.text
    run = await client.post(f"/v1/schedules/{created.json()['id']}/trigger", headers=auth)
    plan = routes(created.json()["id"], run.json()["id"])

    own_server.stop()
    wrong = []
    for method, path, body in plan:
        response = await client.request(method, path, json=body, headers=auth)
        if response.status_code != 503 or response.headers.get("retry-after") is None:
            wrong.append(f"{method} {path}: {response.status_code} {response.text[:200]}")
        elif response.json()["error"]["code"] != "unavailable":
            wrong.append(f"{method} {path}: {response.text[:200]}")
    unknown = await client.get("/v1/runs", headers={"Authorization": "Bearer cwt_x"})
    if unknown.status_code != 503:
        wrong.append(f"unknown token during the outage: {unknown.status_code}")
    assert not wrong, "\n".join(wrong)

    own_server.start()
    for method, path, body in plan:
        response = await client.request(method, path, json=body, headers=auth)
        assert response.status_code in {200, 201, 202, 204}, (method, path, response.text)
    assert (await client.get(f"/v1/runs/{uuid.uuid4()}", headers=auth)).status_code == 404
