"""``cronwire serve`` replicas as real processes, for chaos and end-to-end tests.

Async throughout, so a test can run its sink on the same event loop while replicas run:
nothing here blocks the loop. Typical use::

    async with ReplicaSet(database_url, log_dir=tmp_path) as fleet:
        a = await fleet.spawn("a", roles="executor", delivery_timeout=1)
        ...
        a.kill()                      # SIGKILL; also pause()/resume() (SIGSTOP/SIGCONT)
        assert await a.stop() == 0    # SIGTERM, then the exit status

Every replica gets a free HTTP port, ``SCHEDULER_ALLOW_PRIVATE_TARGETS=true`` (loopback
sinks) and its own log file. Leaving the ``async with`` always reaps every process
(SIGCONT, then SIGKILL), whatever happened in the test.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import signal
import socket
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import aiohttp

from tests.support.processes import clean_env, cronwire_executable

_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)$")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class Replica:
    instance_id: str
    port: int
    process: asyncio.subprocess.Process
    log_path: Path
    _log: IO[bytes]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def running(self) -> bool:
        return self.process.returncode is None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    async def wait_healthy(self, within: float = 30.0) -> None:
        """Poll /healthz until 200 (a process has no event to await); fail on early exit."""
        async with asyncio.timeout(within), aiohttp.ClientSession() as session:
            while True:
                if not self.running:
                    raise AssertionError(f"{self.instance_id} exited early:\n{self.log()[-3000:]}")
                with contextlib.suppress(aiohttp.ClientError, OSError):
                    async with session.get(f"{self.base_url}/healthz") as response:
                        if response.status == 200:
                            return
                await asyncio.sleep(0.05)

    async def metrics(self) -> dict[str, float]:
        """The replica's /metrics as {"name{labels}": value}."""
        async with aiohttp.ClientSession() as session, session.get(
            f"{self.base_url}/metrics", timeout=aiohttp.ClientTimeout(total=5)
        ) as response:
            text = await response.text()
        samples: dict[str, float] = {}
        for line in text.splitlines():
            match = _SAMPLE.match(line)
            if match and not line.startswith("#"):
                samples[match[1] + (match[2] or "")] = float(match[3])
        return samples

    def kill(self) -> None:
        self._signal(signal.SIGKILL)

    def pause(self) -> None:
        self._signal(signal.SIGSTOP)

    def resume(self) -> None:
        self._signal(signal.SIGCONT)

    async def stop(self, within: float = 30.0) -> int:
        """SIGTERM and the exit status (SIGKILL if it has not exited ``within`` seconds)."""
        self._signal(signal.SIGTERM)
        return await self.wait(within)

    async def wait(self, within: float = 30.0) -> int:
        try:
            return await asyncio.wait_for(self.process.wait(), within)
        except TimeoutError:
            self.kill()
            await self.process.wait()
            raise AssertionError(f"{self.instance_id} did not exit within {within}s") from None

    def _signal(self, sig: signal.Signals) -> None:
        if self.running:
            self.process.send_signal(sig)


class ReplicaSet:
    """Spawns replicas against one database and reaps all of them on exit."""

    def __init__(self, database_url: str, *, log_dir: Path) -> None:
        self.database_url = database_url
        self.log_dir = log_dir
        self.replicas: list[Replica] = []

    async def spawn(
        self,
        instance_id: str,
        *,
        roles: str = "executor",
        delivery_timeout: float = 2.0,
        grace_seconds: float = 10.0,
        wait_healthy: bool = True,
        preexec_fn: Callable[[], None] | None = None,
        extra_env: dict[str, str] | None = None,
        **settings: Any,
    ) -> Replica:
        """Start ``cronwire serve``; ``settings`` are more SCHEDULER_* values by field name
        (``executor_workers=64`` sets SCHEDULER_EXECUTOR_WORKERS); ``extra_env`` other
        variables verbatim (``OTEL_*``). ``preexec_fn`` runs in the child before ``exec``
        (e.g. ``resource.setrlimit`` to lower its fd limit)."""
        port = free_port()
        env = clean_env(
            SCHEDULER_DATABASE_URL=self.database_url,
            SCHEDULER_ROLES=roles,
            SCHEDULER_HTTP_PORT=str(port),
            SCHEDULER_INSTANCE_ID=instance_id,
            SCHEDULER_ALLOW_PRIVATE_TARGETS="true",
            SCHEDULER_DELIVERY_TIMEOUT_SECONDS=str(delivery_timeout),
            SCHEDULER_SHUTDOWN_GRACE_SECONDS=str(grace_seconds),
            SCHEDULER_AUTO_MIGRATE="false",
            **{f"SCHEDULER_{name.upper()}": str(value) for name, value in settings.items()},
            **(extra_env or {}),
        )
        log_path = self.log_dir / f"replica-{instance_id}.log"
        log = log_path.open("wb")
        process = await asyncio.create_subprocess_exec(
            cronwire_executable(), "serve", env=env, stdin=asyncio.subprocess.DEVNULL,
            stdout=log, stderr=asyncio.subprocess.STDOUT, preexec_fn=preexec_fn,
        )
        replica = Replica(instance_id, port, process, log_path, log)
        self.replicas.append(replica)
        if wait_healthy:
            await replica.wait_healthy()
        return replica

    async def __aenter__(self) -> ReplicaSet:
        return self

    async def __aexit__(self, *_exc: object) -> None:
        for replica in self.replicas:
            if replica.running:
                replica.resume()
                replica.kill()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(replica.process.wait(), 10)
            replica._log.close()
