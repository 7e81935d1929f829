"""The API's own pool as the composition root wires it (ADR 0055): apart from the replica's
pool and of SCHEDULER_API_DB_POOL_SIZE connections, none without the api role, closed at
shutdown, and through a Postgres restart a 503 while it is down and served again after."""

from __future__ import annotations

import asyncpg
import httpx

from cronwire.adapters.embedded.postgres import EmbeddedPostgres
from cronwire.adapters.postgres.migrator import migrate
from cronwire.api.app import create_app
from cronwire.bootstrap.container import (
    build_container,
    init_resources,
    resolved,
    shutdown_resources,
)
from cronwire.bootstrap.runtime import api_routers, build_runtime
from cronwire.config import Settings
from tests.integration.test_api_outage import own_server  # noqa: F401 (a fixture)
from tests.support.api import schedule_body
from tests.support.secrets import TEST_SECRET_KEYS


async def _ready() -> dict[str, bool]:
    return {}


async def test_the_api_has_a_pool_of_its_own_of_the_configured_size(database_url: str) -> None:
    settings = Settings(secret_keys=TEST_SECRET_KEYS, database_url=database_url, db_pool_size=3, api_db_pool_size=2)
    container = build_container(settings)
    await init_resources(container)
    try:
        own: asyncpg.Pool = await resolved(container.db_pool)
        api: asyncpg.Pool | None = await resolved(container.api_pool)
        runtime = await build_runtime(container)
        assert api is not None and api is not own
        assert (api.get_max_size(), own.get_max_size()) == (2, 3)
        assert runtime.api is not None and runtime.pool is own
    finally:
        await shutdown_resources(container)
    assert api.is_closing()


async def test_a_replica_without_the_api_role_opens_no_api_pool(database_url: str) -> None:
    settings = Settings(secret_keys=TEST_SECRET_KEYS, database_url=database_url, roles=frozenset({"executor"}),
                        db_pool_size=2)
    container = build_container(settings)
    await init_resources(container)
    try:
        assert await resolved(container.api_pool) is None
        runtime = await build_runtime(container)
        assert runtime.api is None and api_routers(runtime) == []
    finally:
        await shutdown_resources(container)


async def test_the_api_pool_answers_503_while_postgres_is_down_and_serves_after(
    own_server: EmbeddedPostgres,  # noqa: F811
) -> None:
    await migrate(own_server.dsn)
    settings = Settings(secret_keys=TEST_SECRET_KEYS, database_url=own_server.dsn, roles=frozenset({"api"}),
                        allow_private_targets=True, db_pool_size=2, api_db_pool_size=2)
    container = build_container(settings)
    await init_resources(container)
    try:
        runtime = await build_runtime(container)
        assert runtime.tenants is not None
        issued = await runtime.tenants.create("restarts")
        headers = {"Authorization": f"Bearer {issued.token}"}
        app = create_app(_ready, lambda: b"", api_routers(runtime))
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                     base_url="http://cronwire") as client:
            created = await client.post("/v1/schedules", json=schedule_body(), headers=headers)
            assert created.status_code == 201, created.text
            own_server.stop()
            down = await client.get("/v1/schedules", headers=headers)
            assert down.status_code == 503, down.text
            own_server.start()
            up = await client.get("/v1/schedules", headers=headers)
            assert up.status_code == 200, up.text
            assert [s["id"] for s in up.json()["items"]] == [created.json()["id"]]
    finally:
        await shutdown_resources(container)
