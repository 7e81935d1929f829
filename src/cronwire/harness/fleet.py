"""``cronwire serve`` replicas as real processes: one fleet for the chaos harness, the load
test and the tests.

Async throughout, so a sink can run on the same event loop while replicas run: nothing
here blocks the loop for long (a SIGKILLed process is reaped at once). Typical use::

    async with Fleet(log_dir) as fleet:
        a = await fleet.launch("a", replica_env(dsn, roles="executor"))
        ...
        a.kill()                      # SIGKILL; also pause()/resume() (SIGSTOP/SIGCONT)
        assert await a.stop() == 0    # SIGTERM (the replica drains), then the exit status

Every replica gets a free HTTP port, its instance id as its name and a log file per
start. Leaving the ``async with`` reaps every process (SIGCONT, then SIGKILL), whatever
happened meanwhile.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import os
import re
import signal
import subprocess
import sys
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp

from cronwire.bootstrap.factories import CLOCK_SKEW_VARIABLE
from cronwire.harness.processes import (
    HarnessError,
    spawn,
    stop_process,
    wait_http,
)
from cronwire.loopback import free_port

START_SECONDS = 90.0  # a cold `serve` on a loaded 2-core machine takes several seconds
SERVE = (sys.executable, "-m", "cronwire.cli", "serve")
_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)$")


# A harness calls its own replicas' API far faster than a tenant should, and writes runs
# in bulk: the per-tenant limits would measure themselves, not the scheduler.
# The highest values the settings accept; a caller that tests a limit passes its own.
UNLIMITED_API = {"SCHEDULER_API_RATE_PER_SECOND": "1000000000",
                 "SCHEDULER_TENANT_MAX_PENDING_RUNS": str(2**31 - 1)}
# The harnesses' and tests' key ring (sealed secrets, ADR 0061): fixed, so every process of
# a run, and a replica restarted mid-run, opens what another sealed. Their databases are
# throwaway; nothing real is ever sealed with it.
HARNESS_SECRET_KEYS = "harness:" + base64.b64encode(
    hashlib.sha256(b"cronwire harness key ring, never for real secrets").digest()).decode()


def replica_env(database_url: str, *, keep: Collection[str] = (),
                **settings: object) -> dict[str, str]:
    """This process's environment without its SCHEDULER_* variables (except those in
    ``keep``) or a clock skew, plus what every harness replica needs: the database,
    loopback targets allowed, no migration at start (the harness migrates once), no
    per-tenant API rate or pending-runs limit in the way (UNLIMITED_API), the harness key
    ring, and ``settings`` by field name (``executor_workers=64`` sets
    SCHEDULER_EXECUTOR_WORKERS; None leaves a variable unset)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCHEDULER_") or k in keep}
    env.pop(CLOCK_SKEW_VARIABLE, None)
    env.update({
        "SCHEDULER_DATABASE_URL": database_url,
        "SCHEDULER_ALLOW_PRIVATE_TARGETS": "true",
        "SCHEDULER_AUTO_MIGRATE": "false",
        **{name: value for name, value in UNLIMITED_API.items() if name not in keep},
        "SCHEDULER_SECRET_KEYS": HARNESS_SECRET_KEYS,
    })
    env.update({f"SCHEDULER_{name.upper()}": str(value)
                for name, value in settings.items() if value is not None})
    return env


@dataclass(eq=False)
class Replica:
    name: str  # also its SCHEDULER_INSTANCE_ID
    env: dict[str, str]
    log_dir: Path
    command: Sequence[str] = SERVE
    port: int = 0
    proc: subprocess.Popen[bytes] | None = None
    preexec_fn: Callable[[], None] | None = None  # run in the child before exec
    starts: int = 0

    @property
    def instance_id(self) -> str:
        return self.name

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.log_dir / f"{self.name}.{self.starts}.log"

    @property
    def pid(self) -> int:
        """The current process's id (AssertionError before the first start)."""
        assert self.proc is not None, f"{self.name} was never started"
        return self.proc.pid

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log(self) -> str:
        """What the current (or last) process wrote."""
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def exit_reason(self, lines: int = 3) -> dict[str, object]:
        """Why the process ended, for a report: its exit status and its last error lines
        (a run's output directory may be gone by the time someone reads the report)."""
        errors = [line for line in self.log().splitlines() if " ERROR " in line
                  or " CRITICAL " in line or line.startswith(("Traceback", "SystemExit"))]
        code = self.proc.poll() if self.proc is not None else None
        return {"replica": self.name, "exit_code": code, "last_errors": errors[-lines:]}

    async def start(self, *, wait_healthy: bool = True, within: float = START_SECONDS) -> None:
        """A new process on a new port (a restart too), healthy unless asked not to wait."""
        self.port = free_port()
        self.starts += 1
        env = dict(self.env, SCHEDULER_HTTP_PORT=str(self.port), SCHEDULER_INSTANCE_ID=self.name)
        self.proc = spawn(self.command, env, self.log_path, self.preexec_fn)
        if wait_healthy:
            await self.wait_healthy(within)

    async def wait_healthy(self, within: float = START_SECONDS) -> None:
        await wait_http(f"{self.base_url}/healthz", within, self.proc,
                        what=f"replica {self.name}", log=self.log_path)

    async def metrics(self, http: aiohttp.ClientSession | None = None) -> dict[str, float]:
        """The replica's /metrics as {"name{labels}": value}."""
        async with contextlib.AsyncExitStack() as stack:
            if http is None:
                http = await stack.enter_async_context(aiohttp.ClientSession())
            async with http.get(f"{self.base_url}/metrics",
                                timeout=aiohttp.ClientTimeout(total=5)) as response:
                text = await response.text()
        samples: dict[str, float] = {}
        for line in text.splitlines():
            match = _SAMPLE.match(line)
            if match and not line.startswith("#"):
                samples[match[1] + (match[2] or "")] = float(match[3])
        return samples

    def signal(self, sig: signal.Signals) -> None:
        if self.running:
            assert self.proc is not None
            self.proc.send_signal(sig)

    def kill(self) -> None:
        """SIGKILL, reaped at once (bounded)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def pause(self) -> None:
        self.signal(signal.SIGSTOP)

    def resume(self) -> None:
        self.signal(signal.SIGCONT)

    async def stop(self, within: float = 30.0) -> int:
        """SIGTERM (the replica drains), SIGKILL after ``within`` seconds; the exit status."""
        if self.proc is None:
            return 0
        return await asyncio.to_thread(stop_process, self.proc, within)

    async def wait(self, within: float = 30.0) -> int:
        """The exit status; HarnessError (after a SIGKILL) if it runs ``within`` seconds on."""
        if self.proc is None:
            return 0
        try:
            return await asyncio.to_thread(self.proc.wait, within)
        except subprocess.TimeoutExpired:
            self.kill()
            raise HarnessError(f"replica {self.name} did not exit within {within:g}s") from None


@dataclass
class Fleet:
    """Replicas started by one harness, reaped together."""

    log_dir: Path
    command: Sequence[str] = SERVE
    replicas: list[Replica] = field(default_factory=list)

    def add(self, name: str, env: dict[str, str], *,
            preexec_fn: Callable[[], None] | None = None) -> Replica:
        """A replica of this fleet, not started yet."""
        replica = Replica(name, env, self.log_dir, self.command, preexec_fn=preexec_fn)
        self.replicas.append(replica)
        return replica

    async def launch(self, name: str, env: dict[str, str], *, wait_healthy: bool = True,
                     preexec_fn: Callable[[], None] | None = None) -> Replica:
        replica = self.add(name, env, preexec_fn=preexec_fn)
        await replica.start(wait_healthy=wait_healthy)
        return replica

    async def stop(self, within: float = 15.0) -> None:
        """SIGTERM every replica at once; each drains and exits (SIGKILL after ``within``)."""
        await asyncio.gather(*(replica.stop(within) for replica in self.replicas))

    async def __aenter__(self) -> Fleet:
        return self

    async def __aexit__(self, *_exc: object) -> None:
        for replica in self.replicas:
            replica.resume()
            replica.kill()
