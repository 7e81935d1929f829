"""The harness sink as a process of its own, and its handle (:class:`SinkProcess`).

``python -m cronwire.harness.sink_process --port N [--out records.jsonl]
[--latency-ms 0] [--failure-rate 0]`` answers every delivery 204 after ``--latency-ms``,
or after ``<ms>`` for a path ``/d/<ms>/...`` (a slow receiver keeps requests in flight,
so a replica killed or stopped has some to lose), and answers ``--failure-rate`` of
requests 503 (retries and the breaker then run under load). ``GET /_stats`` answers
:meth:`Sink.stats`. On SIGTERM it writes its records to ``--out`` before its server's
cleanup, so a request still open cannot cost the others' records. With ``--port 0`` it
prints ``{"port": N}`` first.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import aiohttp

from cronwire.harness.processes import spawn, stop_process, wait_http
from cronwire.harness.sink import Arrival, Behaviour, Reply, Sink
from cronwire.loopback import free_port

MAX_DELAY_MS = 60_000
START_SECONDS = 20.0
ACKNOWLEDGED = Reply(status=204, body=b"")
REFUSED = Reply(status=503, body=b"")


def receiver(latency_seconds: float = 0.0, failure_rate: float = 0.0,
             rng: random.Random | None = None) -> Behaviour:
    """The process sink's answers: the delay its path asks for (``/d/<ms>/...``) or the
    latency, then 503 for ``failure_rate`` of requests and 204 for the others."""
    chance = rng or random.Random()

    def reply(arrival: Arrival) -> Reply:
        parts = arrival.path.split("/")
        delay = latency_seconds
        if len(parts) > 2 and parts[1] == "d" and parts[2].isdigit():
            delay = min(int(parts[2]), MAX_DELAY_MS) / 1000
        answer = REFUSED if failure_rate and chance.random() < failure_rate else ACKNOWLEDGED
        return Reply(status=answer.status, body=answer.body, delay=delay) if delay else answer

    return reply


@dataclass
class SinkProcess:
    """A sink process: started on a free port, asked for its counts, stopped."""

    out: Path | None = None  # where its records go on stop
    latency_ms: float = 0.0
    failure_rate: float = 0.0
    port: int = 0
    proc: subprocess.Popen[bytes] | None = None

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"{self.base}/hook"

    async def start(self) -> SinkProcess:
        self.port = free_port()
        args = [sys.executable, "-m", "cronwire.harness.sink_process", "--port", str(self.port),
                "--latency-ms", str(self.latency_ms), "--failure-rate", str(self.failure_rate)]
        if self.out is not None:
            args += ["--out", str(self.out)]
        self.proc = spawn(args)
        await wait_http(f"{self.base}/_stats", START_SECONDS, self.proc, what="the sink")
        return self

    async def unique(self, http: aiohttp.ClientSession) -> int:
        async with http.get(f"{self.base}/_stats") as response:
            return int((await response.json())["unique"])

    def stop(self, within: float = 15.0) -> None:
        """SIGTERM: the sink writes its records and exits (SIGKILL after ``within``)."""
        if self.proc is not None:
            stop_process(self.proc, within)


async def _serve(port: int, out: Path | None, latency_seconds: float,
                 failure_rate: float) -> None:
    sink = Sink(behaviour=receiver(latency_seconds, failure_rate), port=port,
                keep_requests=False)
    await sink.start()
    if port == 0:
        print(json.dumps({"port": sink.port}), flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    if out is not None:
        sink.dump(out)  # before cleanup: a request still open must not lose the others
    await sink.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--latency-ms", type=float, default=0.0)
    parser.add_argument("--failure-rate", type=float, default=0.0)
    args = parser.parse_args()
    import gc

    gc.freeze()
    gc.set_threshold(20_000, 20, 20)  # the sink must not be the bottleneck it measures
    serving = _serve(args.port, args.out, args.latency_ms / 1000, args.failure_rate)
    try:
        import uvloop

        uvloop.run(serving)
    except ImportError:  # pragma: no cover
        asyncio.run(serving)


if __name__ == "__main__":
    main()
