"""A fast loopback HTTP receiver for load tests: acknowledges every delivery with 204 and
records (webhook-id, scheduled_for, arrival time). Run as its own process:

    python -m cronwire.loadtest.sink --port 9000 --out deliveries.jsonl

GET /_stats answers {"received", "unique"}; SIGTERM writes every record to --out.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import time
from pathlib import Path

from aiohttp import web


class Recorder:
    def __init__(self) -> None:
        self.records: list[tuple[str, str, float]] = []
        self.seen: set[str] = set()

    async def deliver(self, request: web.Request) -> web.Response:
        await request.read()
        webhook_id = request.headers.get("webhook-id", "")
        self.records.append(
            (webhook_id, request.headers.get("x-cronwire-scheduled-for", ""), time.time())
        )
        self.seen.add(webhook_id)
        return web.Response(status=204)

    async def stats(self, _request: web.Request) -> web.Response:
        return web.json_response({"received": len(self.records), "unique": len(self.seen)})

    def dump(self, path: Path) -> None:
        with path.open("w", encoding="utf-8") as out:
            for webhook_id, scheduled_for, at in self.records:
                out.write(json.dumps({"id": webhook_id, "scheduled_for": scheduled_for, "at": at}))
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
    await runner.cleanup()
    recorder.dump(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    try:
        import uvloop

        uvloop.run(serve(args.port, args.out))
    except ImportError:  # pragma: no cover
        asyncio.run(serve(args.port, args.out))


if __name__ == "__main__":
    main()
