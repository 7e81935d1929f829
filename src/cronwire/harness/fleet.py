"""The processes of one chaos scenario: the sink and the ``cronwire serve`` replicas."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import aiohttp

from cronwire.adapters.embedded.postgres import free_port
from cronwire.domain.errors import CronwireError

START_SECONDS = 90.0  # a cold `serve` on a loaded 2-core machine takes several seconds


class ChaosError(CronwireError):
    """The harness could not set a scenario up (not a broken guarantee)."""


def _spawn(args: list[str], env: dict[str, str] | None = None,
           log: Path | None = None) -> subprocess.Popen[bytes]:
    """Start a child process (quick: it is not waited for here)."""
    if log is None:
        return subprocess.Popen(args, env=env, stdin=subprocess.DEVNULL)
    with log.open("wb") as out:
        return subprocess.Popen(args, env=env, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL)


async def wait_http(url: str, within: float, proc: subprocess.Popen[bytes] | None = None) -> None:
    deadline = time.monotonic() + within
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as http:
        while time.monotonic() < deadline:
            if proc is not None and proc.poll() is not None:
                raise ChaosError(f"process {proc.args!r} exited with {proc.returncode}")
            with contextlib.suppress(aiohttp.ClientError, OSError, TimeoutError):
                async with http.get(url) as response:
                    if response.status == 200:
                        return
            await asyncio.sleep(0.1)
    raise ChaosError(f"{url} did not answer within {within:.0f}s")


def stop_process(proc: subprocess.Popen[bytes], within: float = 15.0) -> int:
    """SIGTERM (and SIGCONT, in case it is stopped), then SIGKILL after ``within``."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGCONT)
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(within)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
    return int(proc.returncode)


@dataclass
class Sink:
    out: Path
    port: int = 0
    proc: subprocess.Popen[bytes] | None = None

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> None:
        self.port = free_port()
        self.proc = _spawn([sys.executable, "-m", "cronwire.chaos.sink", "--port",
                            str(self.port), "--out", str(self.out)])
        await wait_http(f"{self.base}/_stats", 30, self.proc)

    async def unique(self, http: aiohttp.ClientSession) -> int:
        async with http.get(f"{self.base}/_stats") as response:
            return int((await response.json())["unique"])

    def stop(self) -> None:
        if self.proc is not None:
            stop_process(self.proc)


@dataclass
class Replica:
    name: str
    env: dict[str, str]
    log_dir: Path
    port: int = 0
    proc: subprocess.Popen[bytes] | None = None
    starts: int = 0

    async def start(self) -> None:
        self.port = free_port()
        env = dict(self.env, SCHEDULER_HTTP_PORT=str(self.port), SCHEDULER_INSTANCE_ID=self.name)
        self.starts += 1
        self.proc = _spawn([sys.executable, "-m", "cronwire.cli", "serve"], env,
                           self.log_dir / f"{self.name}.{self.starts}.log")
        await wait_http(f"http://127.0.0.1:{self.port}/healthz", START_SECONDS, self.proc)

    def signal(self, sig: signal.Signals) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait(10)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    async def metrics(self, http: aiohttp.ClientSession) -> dict[str, float]:
        """Samples of this replica's /metrics (name with labels -> value)."""
        async with http.get(f"http://127.0.0.1:{self.port}/metrics") as response:
            text = await response.text()
        samples: dict[str, float] = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                name, _, value = line.rpartition(" ")
                with contextlib.suppress(ValueError):
                    samples[name] = float(value)
        return samples

    def stop(self) -> None:
        if self.proc is not None:
            stop_process(self.proc)


def replica_env(dsn: str, *, delivery_timeout: float, workers: int, mode: str,
                bootstrap: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCHEDULER_")}
    env.pop("CRONWIRE_CHAOS_CLOCK_SKEW_SECONDS", None)
    env.update({
        "SCHEDULER_DATABASE_URL": dsn,
        "SCHEDULER_ROLES": "planner,executor",
        "SCHEDULER_CLAIM_SOURCE": mode,
        "SCHEDULER_ALLOW_PRIVATE_TARGETS": "true",
        "SCHEDULER_AUTO_MIGRATE": "false",
        "SCHEDULER_EXECUTOR_WORKERS": str(workers),
        # Short: leases are 2 x this, so a dead owner's runs come back within seconds.
        "SCHEDULER_DELIVERY_TIMEOUT_SECONDS": str(delivery_timeout),
        "SCHEDULER_SHUTDOWN_GRACE_SECONDS": "3",
        "SCHEDULER_DB_POOL_SIZE": "6",
        "SCHEDULER_LOG_FORMAT": "text",
    })
    if bootstrap:
        env["SCHEDULER_KAFKA_BOOTSTRAP_SERVERS"] = bootstrap
    return env
