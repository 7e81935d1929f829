"""The chaos receiver: acknowledges every delivery with 204 and records, per request,
when it arrived and when it was answered. Run as its own process:

    python -m cronwire.chaos.sink --port 9000 --out deliveries.jsonl

A path ``/d/<ms>/...`` answers after ``ms`` milliseconds: a slow receiver keeps requests
in flight, so a replica killed or stopped has some to lose. GET /_stats answers
{"received", "unique"}; SIGTERM writes every record to --out.

Its own small sink rather than the load test's: the chaos accounting needs the arrival
time of each request (was it in flight when a replica died?) and the delay paths.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import time
from pathlib import Path

from aiohttp import web

MAX_DELAY_MS = 60_000


class Recorder:
    def __init__(self) -> None:
        self.records: list[dict[str, object]] = []
        self.seen: set[str] = set()

    async def deliver(self, request: web.Request) -> web.Response:
        started = time.time()
        await request.read()
        parts = request.path.split("/")
        if len(parts) > 2 and parts[1] == "d" and parts[2].isdigit():
            await asyncio.sleep(min(int(parts[2]), MAX_DELAY_MS) / 1000)
        webhook_id = request.headers.get("webhook-id", "")
        self.records.append({
            "id": webhook_id,
            "run_id": request.headers.get("x-cronwire-run-id", ""),
            "scheduled_for": request.headers.get("x-cronwire-scheduled-for", ""),
            "attempt": request.headers.get("x-cronwire-attempt", ""),
            "started": started,
            "answered": time.time(),
        })
        self.seen.add(webhook_id)
        return web.Response(status=204)

    async def stats(self, _request: web.Request) -> web.Response:
        return web.json_response({"received": len(self.records), "unique": len(self.seen)})

    def dump(self, path: Path) -> None:
        with path.open("w", encoding="utf-8") as out:
            for record in self.records:
                out.write(json.dumps(record))
                out.write("\n")


async def serve(port: int, out: Path) -> None:
    recorder = Recorder()
    app = web.Application(client_max_size=1 << 20)
    app.router.add_get("/_stats", recorder.stats)
    app.router.add_route("*", "/{tail:.*}", recorder.deliver)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port, backlog=2048).start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    recorder.dump(out)  # before cleanup: a request still open must not lose the others
    await runner.cleanup()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    asyncio.run(serve(args.port, args.out))


if __name__ == "__main__":
    main()
