"""A fast loopback HTTP receiver for load tests: acknowledges a delivery with 204 and
records (webhook-id, scheduled_for, arrival time). Run as its own process:

    python -m cronwire.loadtest.sink --port 9000 --out deliveries.jsonl
        [--latency-ms 0] [--failure-rate 0]

``--latency-ms`` holds every answer that long (a slow receiver: more requests in
flight); ``--failure-rate`` answers that fraction of requests 503 and does not record
them (retries and the circuit breaker then run under load).

GET /_stats answers {"received", "unique", "failed", "lag_p99_ms"}, the lag being that
of the acknowledgements since the previous /_stats call; SIGTERM writes every record
to --out.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import signal
import time
from datetime import datetime
from pathlib import Path

from aiohttp import web


class Recorder:
    def __init__(self, latency_seconds: float = 0.0, failure_rate: float = 0.0) -> None:
        self.records: list[tuple[str, str, float]] = []
        self.seen: set[str] = set()
        self.failed = 0
        self._latency = latency_seconds
        self._failure_rate = failure_rate
        self._reported = 0  # records already covered by a /_stats lag figure
        self._instants: dict[str, float] = {}

    async def deliver(self, request: web.Request) -> web.Response:
        await request.read()
        if self._latency:
            await asyncio.sleep(self._latency)
        if self._failure_rate and random.random() < self._failure_rate:
            self.failed += 1
            return web.Response(status=503)
        webhook_id = request.headers.get("webhook-id", "")
        self.records.append(
            (webhook_id, request.headers.get("x-cronwire-scheduled-for", ""), time.time())
        )
        self.seen.add(webhook_id)
        return web.Response(status=204)

    def _instant(self, text: str) -> float | None:
        # Every run of one occurrence shares its instant: parse each text once.
        if text not in self._instants:
            try:
                self._instants[text] = datetime.fromisoformat(text).timestamp()
            except ValueError:
                return None
        return self._instants[text]

    def recent_lag_p99_ms(self) -> float | None:
        recent = self.records[self._reported:]
        self._reported = len(self.records)
        lags = sorted(
            at - instant for _id, text, at in recent
            if (instant := self._instant(text)) is not None
        )
        if not lags:
            return None
        return round(lags[min(len(lags) - 1, int(0.99 * len(lags)))] * 1000, 1)

    async def stats(self, _request: web.Request) -> web.Response:
        return web.json_response({
            "received": len(self.records), "unique": len(self.seen), "failed": self.failed,
            "lag_p99_ms": self.recent_lag_p99_ms(),
        })

    def dump(self, path: Path) -> None:
        with path.open("w", encoding="utf-8") as out:
            for webhook_id, scheduled_for, at in self.records:
                out.write(json.dumps({"id": webhook_id, "scheduled_for": scheduled_for, "at": at}))
                out.write("\n")


async def serve(port: int, out: Path, latency_seconds: float, failure_rate: float) -> None:
    recorder = Recorder(latency_seconds, failure_rate)
    app = web.Application(client_max_size=1 << 20)
    app.router.add_get("/_stats", recorder.stats)
    app.router.add_route("*", "/{tail:.*}", recorder.deliver)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port, backlog=4096).start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await runner.cleanup()
    recorder.dump(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--latency-ms", type=float, default=0.0)
    parser.add_argument("--failure-rate", type=float, default=0.0)
    args = parser.parse_args()
    import gc

    gc.freeze()
    gc.set_threshold(20_000, 20, 20)  # the sink must not be the bottleneck it measures
    try:
        import uvloop

        uvloop.run(serve(args.port, args.out, args.latency_ms / 1000, args.failure_rate))
    except ImportError:  # pragma: no cover
        asyncio.run(serve(args.port, args.out, args.latency_ms / 1000, args.failure_rate))


if __name__ == "__main__":
    main()
