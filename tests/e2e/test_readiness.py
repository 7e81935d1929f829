"""/readyz tells the truth and recovers by itself: a real Postgres stopped and started
again, migrations falling behind and catching up, and a loop that stopped running."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg
import httpx
import pytest

from cronwire.adapters.embedded.postgres import FAST_UNSAFE_SETTINGS, EmbeddedPostgres
from cronwire.adapters.postgres.migrator import migrate
from cronwire.api.app import create_app
from cronwire.bootstrap.container import build_container, init_resources, shutdown_resources
from cronwire.bootstrap.replica import _readiness
from cronwire.bootstrap.runtime import build_runtime
from cronwire.config import load_settings
from cronwire.service.supervisor import Supervisor
from tests.support.cli_shell import follow_runs
from tests.support.processes import clean_env, run_cli
from tests.support.replicas import Replica, ReplicaSet
from tests.support.secrets import TEST_SECRET_KEYS


async def _ready_state(replica: Replica) -> tuple[int, dict[str, Any]]:
    async with aiohttp.ClientSession() as session, session.get(
        f"{replica.base_url}/readyz", timeout=aiohttp.ClientTimeout(total=10)
    ) as response:
        return response.status, await response.json()


async def _wait_ready(replica: Replica, status: int, within: float) -> dict[str, Any]:
    """Poll /readyz until it answers ``status``; returns that body."""
    body: dict[str, Any] = {}
    try:
        async with asyncio.timeout(within):
            while True:
                seen, body = await _ready_state(replica)
                if seen == status:
                    return body
                await asyncio.sleep(0.2)
    except TimeoutError:
        raise AssertionError(f"/readyz not {status} within {within}s; last body {body}\n"
                             f"{replica.log()[-3000:]}") from None


@pytest.fixture
def own_postgres(server_dir: Path) -> Any:
    """A Postgres of this test alone, so stopping it disturbs no other test."""
    server = EmbeddedPostgres(server_dir / "pg", settings=dict(FAST_UNSAFE_SETTINGS))
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.mark.slow
async def test_readyz_fails_while_postgres_is_down_and_recovers(
    own_postgres: EmbeddedPostgres, tmp_path: Path
) -> None:
    await migrate(own_postgres.dsn)
    async with ReplicaSet(own_postgres.dsn, log_dir=tmp_path) as fleet:
        replica = await fleet.spawn("ready-db", roles="api,planner,executor")
        await _wait_ready(replica, 200, within=30)

        await asyncio.to_thread(own_postgres.stop)
        body = await _wait_ready(replica, 503, within=30)
        assert "database" in body["failing"]
        assert body["checks"]["database"] is False
        assert (await replica.metrics())['scheduler_readiness{check="database"}'] == 0.0

        await asyncio.to_thread(own_postgres.start)  # same data directory, same port
        body = await _wait_ready(replica, 200, within=60)
        assert body["failing"] == []
        assert replica.running


async def test_readyz_fails_while_migrations_are_behind_and_recovers(
    database_url: str, db_pool: asyncpg.Pool, tmp_path: Path
) -> None:
    async with ReplicaSet(database_url, log_dir=tmp_path) as fleet:
        replica = await fleet.spawn("ready-migrations", roles="api")
        await _wait_ready(replica, 200, within=30)
        latest = await db_pool.fetchrow(
            "DELETE FROM schema_migration WHERE version = (SELECT max(version)"
            " FROM schema_migration) RETURNING version, name, checksum")
        body = await _wait_ready(replica, 503, within=30)
        assert body["failing"] == ["migrations"]

        await db_pool.execute(
            "INSERT INTO schema_migration (version, name, checksum) VALUES ($1, $2, $3)",
            latest["version"], latest["name"], latest["checksum"])
        await _wait_ready(replica, 200, within=30)


@pytest.fixture
async def ops_client(database_url: str) -> AsyncIterator[tuple[httpx.AsyncClient, Supervisor]]:
    settings = dataclasses.replace(load_settings({}), database_url=database_url,
                                   secret_keys=TEST_SECRET_KEYS)
    container = build_container(settings)
    await init_resources(container)
    runtime = await build_runtime(container)
    supervisor = Supervisor()
    app = create_app(_readiness(runtime, supervisor), runtime.metrics.exposition)
    transport = httpx.ASGITransport(app=app)
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://replica") as client:
            yield client, supervisor
    finally:
        await supervisor.stop(1)
        await shutdown_resources(container)


async def test_a_loop_that_stopped_makes_readyz_fail(
    ops_client: tuple[httpx.AsyncClient, Supervisor],
) -> None:
    client, supervisor = ops_client
    crashed = asyncio.Event()

    async def steady(stopping: asyncio.Event) -> None:
        await stopping.wait()

    async def breaks(_stopping: asyncio.Event) -> None:
        crashed.set()
        raise RuntimeError("loop body failed")

    supervisor.start("steady", steady)
    ready = await client.get("/readyz")
    assert ready.status_code == 200, ready.text

    supervisor.start("breaks", breaks)
    await asyncio.wait_for(crashed.wait(), 5)
    still_running = [t for t in asyncio.all_tasks() if t.get_name() == "breaks"]
    if still_running:  # all_tasks() leaves out finished tasks
        await asyncio.wait(still_running, timeout=5)
    assert supervisor.health()["breaks"] is False
    failed = await client.get("/readyz")
    assert failed.status_code == 503
    assert failed.json()["failing"] == ["loop:breaks"]
    assert failed.json()["checks"]["loop:steady"] is True


async def _readiness_series(replica: Replica, within: float) -> dict[str, float]:
    """scheduler_readiness from /metrics alone (no /readyz call), once it is exported."""
    deadline = asyncio.get_running_loop().time() + within
    while True:
        series = {k: v for k, v in (await replica.metrics()).items()
                  if k.startswith("scheduler_readiness{")}
        if series or asyncio.get_running_loop().time() > deadline:
            return series
        await asyncio.sleep(0.2)


@pytest.mark.slow
async def test_a_database_outage_is_the_database_check_and_follow_waits_it_out(
    own_postgres: EmbeddedPostgres, tmp_path: Path
) -> None:
    """Found in review: scheduler_readiness was missing from /metrics until someone called
    /readyz; /readyz also failed `migrations` while Postgres was down (whose runbook says
    roll back the image); and `runs list --follow` quit on the outage's 503."""
    await migrate(own_postgres.dsn)
    async with ReplicaSet(own_postgres.dsn, log_dir=tmp_path) as fleet:
        replica = await fleet.spawn("outage", roles="api,planner,executor")
        series = await _readiness_series(replica, within=10)
        assert series.get('scheduler_readiness{check="database"}') == 1.0, series
        assert series.get('scheduler_readiness{check="migrations"}') == 1.0, series

        env = clean_env(SCHEDULER_DATABASE_URL=own_postgres.dsn, CRONWIRE_URL=replica.base_url)
        env["CRONWIRE_TOKEN"] = json.loads(run_cli("tenant", "create", "watcher",
                                                   env=env).stdout)["token"]
        created = run_cli("schedules", "create", "--name", "watched", "--cron", "0 3 * * *",
                          "--url", f"{replica.base_url}/healthz", "--paused", env=env)
        sid = json.loads(created.stdout)["id"]
        with follow_runs(["--schedule-id", sid, "--interval", "0.2"], env) as followed:
            await asyncio.to_thread(own_postgres.stop)
            body = await _wait_ready(replica, 503, within=30)
            assert body["failing"] == ["database"], body
            assert "migrations" not in body["checks"], body
            # The follower polls every 0.2 s into the outage's 503s; it must still be there
            # after a few of them (before the fix it exited 1 at the first).
            await asyncio.sleep(3)
            assert followed.proc.poll() is None, "--follow exited on the outage's 503"

            await asyncio.to_thread(own_postgres.start)
            await _wait_ready(replica, 200, within=60)
            run = json.loads(run_cli("schedules", "trigger", sid, env=env).stdout)
            await asyncio.to_thread(
                followed.wait_for, lambda runs: any(r["id"] == run["id"] for r in runs), 60)
        assert "following again in" in followed.stderr, followed.stderr
