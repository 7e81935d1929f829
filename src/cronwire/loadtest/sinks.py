"""The load test's receiver: nginx (harness/nginx_sink.py) or the harness's Python sink
(harness/sink_process.py), behind one handle the run, the watcher, the report and
``--compare`` use alike.

nginx is the default wherever it is installed and the receiver only has to answer at
once: it costs a few µs of CPU per request where the Python sink costs about as much as a
replica spends on a whole run, on the same cores. A slow or failing receiver
(``--sink-latency-ms``, ``--sink-failure-rate``) is the Python sink's to play.
"""

from __future__ import annotations

import json
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from cronwire.domain.errors import ConfigError
from cronwire.harness.nginx_sink import NginxSink, nginx_binary
from cronwire.harness.sink_process import SinkProcess
from cronwire.loadtest.plan import LoadTestError, LoadTestPlan


class LoadSink(Protocol):
    kind: str  # "nginx" or "python", named in the report

    @property
    def url(self) -> str:
        """Where deliveries go."""

    def stats(self) -> dict[str, float | None]:
        """Counts so far (:meth:`cronwire.harness.sink.Sink.stats`'s keys); LoadTestError
        once the sink is gone."""

    def pids(self) -> list[int]:
        """The sink's processes, for their CPU time."""

    def stop(self, within: float) -> None:
        """Stop it; its records are complete afterwards."""

    def acknowledgements(self) -> Iterator[tuple[str, float]]:
        """(webhook-id, time.time()) of every 2xx answer, duplicates included."""


def choose_sink(requested: str | None, latency_ms: float, failure_rate: float) -> str:
    """``--sink`` as given, or its default: nginx if installed and the receiver answers at
    once, else python. ConfigError (naming the flag) for a choice that cannot work."""
    plain = latency_ms == 0 and failure_rate == 0
    if requested is None:
        return "nginx" if plain and nginx_binary() is not None else "python"
    if requested == "nginx" and not plain:
        raise ConfigError("--sink nginx: nginx answers every request 200 at once; "
                          "--sink-latency-ms and --sink-failure-rate need --sink python")
    if requested == "nginx" and nginx_binary() is None:
        raise ConfigError("--sink nginx: nginx is not installed (apt-get install nginx)")
    return requested


def sink_stats(port: int, timeout: float = 5.0) -> dict[str, float | None]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stats", timeout=timeout) as response:
        stats: dict[str, float | None] = json.load(response)
        return stats


class SinkWatch:
    """The Python sink's /_stats, read while the sink is at full load. A sink busy with
    hundreds of connections (three replicas' burst) can leave one stats request
    unanswered for seconds; that is no reason to abandon the run, so the last answer
    stands in until the sink has been silent for ``patience`` seconds or its process has
    exited."""

    def __init__(self, port: int, proc: subprocess.Popen[bytes] | None = None, *,
                 timeout: float = 5.0, patience: float = 60.0) -> None:
        self._port, self._proc = port, proc
        self._timeout, self._patience = timeout, patience
        self._last: dict[str, float | None] = {}
        self._silent_since: float | None = None

    def read(self) -> dict[str, float | None]:
        try:
            self._last = sink_stats(self._port, self._timeout)
        except (OSError, ValueError) as exc:  # URLError and socket timeouts are OSErrors
            if self._proc is not None and self._proc.poll() is not None:
                raise LoadTestError(f"the sink exited with {self._proc.returncode}") from None
            now = time.monotonic()
            self._silent_since = self._silent_since or now
            if now - self._silent_since >= self._patience:
                raise LoadTestError(
                    f"the sink did not answer /_stats for {self._patience:g}s: {exc}") from None
            return self._last
        self._silent_since = None
        return self._last


@dataclass
class PythonSink:
    """The harness's Python sink process as a :class:`LoadSink`."""

    process: SinkProcess
    kind: str = "python"
    _watch: SinkWatch | None = None

    @property
    def url(self) -> str:
        return self.process.url

    async def start(self) -> PythonSink:
        await self.process.start()
        self._watch = SinkWatch(self.process.port, self.process.proc)
        return self

    def stats(self) -> dict[str, float | None]:
        assert self._watch is not None, "start() first"
        return self._watch.read()

    def pids(self) -> list[int]:
        proc = self.process.proc
        return [proc.pid] if proc is not None and proc.poll() is None else []

    def stop(self, within: float) -> None:
        self.process.stop(within)

    def acknowledgements(self) -> Iterator[tuple[str, float]]:
        return records_acknowledgements(self.process.out)


def records_acknowledgements(records: Path | None) -> Iterator[tuple[str, float]]:
    """(id, at) of each line of a Python sink's records (each one a 2xx answer)."""
    if records is None or not records.exists():
        return
    with records.open(encoding="utf-8") as lines:
        for line in lines:
            record = json.loads(line)
            yield record["id"], float(record["at"])


async def start_sink(plan: LoadTestPlan, name: str) -> LoadSink:
    """The plan's sink, started; its records under OUT/<name>(.jsonl)."""
    if plan.sink == "nginx":
        return await NginxSink(plan.out / name).start()
    return await PythonSink(SinkProcess(plan.out / f"{name}.jsonl", plan.sink_latency_ms,
                                        plan.sink_failure_rate)).start()
