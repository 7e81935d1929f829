"""Deliveries per second of each Deliverer adapter against a local aiohttp sink.

``lean`` parses answers with llhttp (httptools); ``lean-h11`` is the same deliverer with
h11 reading the answers (benchmarks/h11_reader.py, the candidate ADR 0026 measured).

The sink runs in its own process on 127.0.0.1 so the measured event loop only
does the client's work (signing included: this is the real ``deliver`` path).
Bounded: at most ``--requests`` deliveries or ``--max-seconds`` per adapter.
Prints one JSON line.

    .venv/bin/python benchmarks/bench_http_clients.py --requests 5000 --concurrency 64
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import platform
import statistics
import time
from datetime import UTC, datetime
from importlib.metadata import version
from typing import Any
from uuid import uuid4

from aiohttp import web

from cronwire.adapters.http import http1, response_reader
from cronwire.adapters.http.guard import TargetGuard
from cronwire.adapters.http.httpx_deliverer import HttpxDeliverer
from cronwire.adapters.http.lean_deliverer import LeanDeliverer
from cronwire.domain.delivery import DeliveryRequest, Outcome, new_signing_secret

ADAPTERS = {"lean": LeanDeliverer, "lean-h11": LeanDeliverer, "httpx": HttpxDeliverer}


def _run_sink(ports: Any, stop: Any) -> None:
    async def handle(request: web.Request) -> web.Response:
        await request.read()
        return web.Response(text="ok")

    async def serve() -> None:
        app = web.Application()
        app.router.add_post("/hook", handle)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        ports.put(runner.addresses[0][1])
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, stop.wait, 120.0)  # bounded even if never told
        await runner.cleanup()

    asyncio.run(serve())


async def _bench(
    name: str, url: str, total: int, concurrency: int, max_seconds: float
) -> dict[str, Any]:
    if name == "lean-h11":
        from benchmarks.h11_reader import H11ResponseReader

        http1.Connection.reader_class = H11ResponseReader  # type: ignore[assignment]
    elif hasattr(http1, "ResponseReader"):
        http1.Connection.reader_class = response_reader.ResponseReader
    deliverer = ADAPTERS[name](TargetGuard(allow_private=True), max_connections=concurrency)
    await deliverer.start()
    secret = new_signing_secret()
    tenant = uuid4()

    def request(n: int) -> DeliveryRequest:
        return DeliveryRequest(
            run_id=uuid4(),
            schedule_id=uuid4(),
            tenant_id=tenant,
            idempotency_key=f"bench-{n}",
            scheduled_for=datetime.now(UTC),
            attempt=1,
            method="POST",
            url=url,
            headers={},
            body=b'{"bench": true}',
            signing_secrets=(secret,),
            timeout_seconds=10.0,
        )

    try:
        for n in range(min(200, total)):  # warm the pool
            await deliverer.deliver(request(n))
        issued = 0
        latencies: list[float] = []
        failures = 0
        began = time.monotonic()
        cpu_began = time.process_time()
        deadline = began + max_seconds

        async def worker() -> None:
            nonlocal issued, failures
            while issued < total and time.monotonic() < deadline:
                issued += 1
                result = await deliverer.deliver(request(issued))
                latencies.append(result.duration_ms)
                failures += result.outcome is not Outcome.SUCCESS

        await asyncio.gather(*(worker() for _ in range(concurrency)))
        elapsed = time.monotonic() - began
        cpu = time.process_time() - cpu_began
    finally:
        await deliverer.close()
    done = len(latencies)
    cuts = statistics.quantiles(latencies, n=100) if done >= 2 else [0.0] * 99
    return {
        "deliveries": done,
        "failures": failures,
        "seconds": round(elapsed, 3),
        "deliveries_per_second": round(done / elapsed, 1),
        # The client's own CPU per delivery: steadier than the rate on a shared machine.
        "cpu_us_per_delivery": round(cpu / max(1, done) * 1e6, 1),
        "latency_p50_ms": cuts[49],
        "latency_p99_ms": cuts[98],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=5000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--max-seconds", type=float, default=20.0)
    parser.add_argument("--adapters", default="lean,lean-h11,httpx")
    args = parser.parse_args()

    ctx = multiprocessing.get_context("spawn")
    ports, stop = ctx.Queue(), ctx.Event()
    sink = ctx.Process(target=_run_sink, args=(ports, stop), daemon=True)
    sink.start()
    try:
        url = f"http://127.0.0.1:{ports.get(timeout=30)}/hook"
        results = {  # an adapter named twice is measured twice: name, name#2, ...
            name + (f"#{n}" if n > 1 else ""): asyncio.run(
                _bench(name, url, args.requests, args.concurrency, args.max_seconds))
            for names in [args.adapters.split(",")]
            for i, name in enumerate(names)
            for n in [names[: i + 1].count(name)]
        }
    finally:
        stop.set()
        sink.join(timeout=10)
        if sink.is_alive():
            sink.terminate()
    print(
        json.dumps(
            {
                "benchmark": "deliverer_throughput",
                "requests": args.requests,
                "concurrency": args.concurrency,
                "python": platform.python_version(),
                "versions": {name: version(name) for name in ("httptools", "h11", "httpx", "httpcore")},
                "cpus": multiprocessing.cpu_count(),
                "results": results,
            }
        )
    )


if __name__ == "__main__":
    main()
