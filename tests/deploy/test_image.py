"""The container image, built from the Dockerfile as it is and run with podman (marker
``deploy``: `python -m pytest -m deploy`, a step of its own in .ci/run).

The base image is a local stand-in for python:3.11-slim (deploy/podman/base-images.sh:
public registries are unreachable here); the Dockerfile's `FROM python:3.11-slim` finds
it. The image then serves against a Postgres container and against its embedded default,
delivers a schedule to a receiver on the host, passes its HEALTHCHECK, runs as its
non-root user and drains a request in flight at SIGTERM. The build time and the image
size are printed (docs/operating.md quotes them).
"""

from __future__ import annotations

import asyncio
import json
import re
import time
import tomllib
import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta
from pathlib import Path

import aiohttp
import asyncpg
import pytest

from cronwire.adapters.postgres.migrator import migrate
from cronwire.bootstrap.factories import open_pool
from cronwire.domain.documents import retry_to_document, target_to_document
from cronwire.domain.model import RetryPolicy, Target
from cronwire.harness.fleet import HARNESS_SECRET_KEYS
from cronwire.harness.seeding import db_now, seed_firing_schedules, seed_tenant
from cronwire.harness.sink import Reply, Sink, always
from cronwire.loopback import free_port
from tests.support.podman import (
    IMAGE,
    Container,
    build_image,
    ensure_base_images,
    image_inspect,
    image_size_bytes,
    podman,
    running,
    unavailable,
)

pytestmark = [pytest.mark.deploy, pytest.mark.timeout(1800)]

REPO = Path(__file__).resolve().parents[2]
POSTGRES_IMAGE = "docker.io/library/postgres:17"  # the stand-in (base-images.sh)
PASSWORD = "cronwire-test"
RETRY = retry_to_document(RetryPolicy(3, 1.0, 5.0))
HEALTHY_WITHIN = 60.0
DELIVERED_WITHIN = 30.0


@pytest.fixture(scope="module")
def image() -> str:
    reason = unavailable()
    if reason:
        pytest.skip(reason)
    ensure_base_images(stand_ins=True)
    seconds = build_image(IMAGE)
    print(f"\nimage {IMAGE}: built in {seconds:.1f} s (base images cached), "
          f"{image_size_bytes(IMAGE) / 1e6:.0f} MB")
    return IMAGE


@pytest.fixture(scope="module")
def postgres_admin(image: str) -> Iterator[str]:
    """A Postgres container (port published on loopback); its admin DSN."""
    port = free_port()
    env = {"POSTGRES_USER": "cronwire", "POSTGRES_PASSWORD": PASSWORD, "POSTGRES_DB": "cronwire"}
    with running(POSTGRES_IMAGE, env=env,
                 options=("--publish", f"127.0.0.1:{port}:5432")) as box:
        deadline = time.monotonic() + HEALTHY_WITHIN
        while box.exec("pg_isready", "-U", "cronwire", "-d", "cronwire").returncode != 0:
            assert time.monotonic() < deadline, box.logs()[-2000:]
            time.sleep(0.2)
        yield f"postgresql://cronwire:{PASSWORD}@127.0.0.1:{port}/cronwire"


@pytest.fixture
async def database(postgres_admin: str) -> str:
    """A fresh, empty database of this test's own on the Postgres container."""
    name = f"cw_image_{uuid.uuid4().hex[:10]}"
    admin = await asyncpg.connect(postgres_admin)
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
    finally:
        await admin.close()
    return postgres_admin.rsplit("/", 1)[0] + f"/{name}"


@pytest.fixture
async def receiver() -> AsyncIterator[Sink]:
    async with Sink() as sink:
        yield sink


def _serve_env(port: int, database_url: str | None = None) -> dict[str, str]:
    env = {"SCHEDULER_HTTP_PORT": str(port), "SCHEDULER_ALLOW_PRIVATE_TARGETS": "true",
           "SCHEDULER_SECRET_KEYS": HARNESS_SECRET_KEYS}  # the seeding below seals with it
    if database_url:
        env["SCHEDULER_DATABASE_URL"] = database_url
    return env


async def _readyz(port: int) -> dict[str, object]:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as http, \
            http.get(f"http://127.0.0.1:{port}/readyz") as answer:
        assert answer.status == 200, await answer.text()
        body: dict[str, object] = await answer.json()
        return body


async def _schedule_firing_once(dsn: str, url: str) -> None:
    """One schedule firing every second for two seconds, from two seconds on."""
    pool = await open_pool(dsn, 2)
    try:
        tenant = await seed_tenant(pool, "image-test")
        first = (await db_now(pool)).replace(microsecond=0) + timedelta(seconds=2)
        await seed_firing_schedules(pool, tenant, 1, cron="* * * * * *",
                                    target=target_to_document(Target(url)), retry=RETRY,
                                    first=first, ends_at=first + timedelta(seconds=1),
                                    name="image-")
    finally:
        await pool.close()


async def _delivered(box: Container, dsn: str, receiver: Sink) -> None:
    await _schedule_firing_once(dsn, receiver.url)
    try:
        await receiver.wait_for(lambda sink: sink.received >= 2, DELIVERED_WITHIN)
    except TimeoutError:
        raise AssertionError(f"no delivery; the container's log:\n{box.logs()[-3000:]}") from None
    assert all(a.status == 200 for a in receiver.arrivals)
    assert receiver.arrivals[0].headers["webhook-signature"].startswith("v1,")


def test_the_dockerfile_builds_unchanged_into_an_image_of_a_non_root_user(image: str) -> None:
    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    done = podman("run", "--rm", image, "--version")
    assert done.stdout.strip() == f"cronwire {version}"
    found = image_inspect(image)
    config = found["Config"]
    assert config["User"] == "10001:10001"
    assert config["Entrypoint"] == ["cronwire"] and config["Cmd"] == ["serve"]
    assert "/healthz" in " ".join(found["Healthcheck"]["Test"])  # docker format keeps it
    done = podman("run", "--rm", "--entrypoint", "id", image)
    assert done.stdout.startswith("uid=10001(cronwire) gid=10001(cronwire)")


async def test_migrate_then_serve_against_a_postgres_container(
    image: str, database: str, receiver: Sink,
) -> None:
    migrated = await asyncio.to_thread(
        podman, "run", "--rm", "--network", "host", "--env",
        f"SCHEDULER_DATABASE_URL={database}", image, "migrate")
    assert 1 in json.loads(migrated.stdout)["applied"]
    again = await asyncio.to_thread(
        podman, "run", "--rm", "--network", "host", "--env",
        f"SCHEDULER_DATABASE_URL={database}", image, "migrate")
    assert json.loads(again.stdout)["applied"] == []  # nothing left to apply
    port = free_port()
    env = _serve_env(port, database) | {"SCHEDULER_AUTO_MIGRATE": "false"}
    with running(image, "serve", env=env) as box:
        healthy = await asyncio.to_thread(box.wait_healthy, HEALTHY_WITHIN)
        print(f"\nimage against a Postgres container: HEALTHCHECK passing {healthy:.1f} s "
              "after the start")
        ready = await _readyz(port)
        assert ready["status"] == "ready" and ready["checks"]["database"] is True  # type: ignore[index]
        await _delivered(box, database, receiver)
        # The server process (PID 1 in the container) is the image's user, not root.
        top = await asyncio.to_thread(podman, "top", box.name, "user", "huser", "args")
        row = next(line for line in top.stdout.splitlines() if "cronwire serve" in line)
        assert row.split()[:2] == ["cronwire", "10001"], top.stdout


async def test_serve_with_the_embedded_default(image: str, receiver: Sink) -> None:
    """No SCHEDULER_DATABASE_URL: Postgres inside the container, under SCHEDULER_HOME."""
    port = free_port()
    with running(image, "serve", env=_serve_env(port)) as box:
        await asyncio.to_thread(box.wait_healthy, HEALTHY_WITHIN)
        ready = await _readyz(port)
        assert ready["checks"]["migrations"] is True  # type: ignore[index]
        # Host network: the embedded server's loopback port is ours to seed through.
        found = re.search(r"data in /var/lib/cronwire/postgres, listening on "
                          r"127\.0\.0\.1:(\d+)", box.logs())
        assert found, box.logs()[-2000:]
        dsn = f"postgresql://postgres@127.0.0.1:{found.group(1)}/postgres"
        await _delivered(box, dsn, receiver)


async def test_sigterm_drains_the_request_in_flight(image: str, database: str) -> None:
    """`podman stop` sends SIGTERM while the receiver holds a request: the replica waits
    for the answer, records it, and exits 0 within its grace."""
    async with Sink(behaviour=always(Reply(status=200, delay=3.0))) as slow:
        dsn = database
        await migrate(dsn)
        port = free_port()
        env = _serve_env(port, dsn) | {"SCHEDULER_SHUTDOWN_GRACE_SECONDS": "20"}
        with running(image, "serve", env=env) as box:
            await asyncio.to_thread(box.wait_healthy, HEALTHY_WITHIN)
            await _schedule_firing_once(dsn, slow.url)
            await slow.wait_for(lambda sink: len(sink.arrivals) >= 1, DELIVERED_WITHIN)
            started = time.monotonic()
            code = await asyncio.to_thread(box.stop, 30)
            took = time.monotonic() - started
            log = box.logs()
        assert code == 0, log[-3000:]
        assert "shutting down: draining within 20" in log and "stopped" in log
        assert 1.0 < took < 20, took  # it waited for the held answer, not for the kill
        assert slow.arrivals[0].status == 200
        conn = await asyncpg.connect(dsn)
        try:
            states = await conn.fetch("SELECT status, attempt_count FROM job_run "
                                      "WHERE status <> 'pending' ORDER BY scheduled_for")
        finally:
            await conn.close()
        assert states and states[0]["status"] == "succeeded", states
        print(f"\nimage SIGTERM drain: exit 0 {took:.1f} s after `podman stop`")
