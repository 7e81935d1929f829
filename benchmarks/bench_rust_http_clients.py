"""CPU per delivery: the lean deliverer against the Rust-backed HTTP clients on PyPI.

A Rust-backed client may replace ours if it keeps "connect only to the checked address"
and passes the hostile-receiver suite. Before any of that, this measures whether one would
cost the replica less CPU per delivery, which is the only reason to take one (docs/benchmarks.md#levers).
Each client runs in a process of its own (its runtime's threads count: RUSAGE_SELF covers
every thread) against nginx on loopback, under uvloop, with ``--concurrency`` requests in
flight, after a warm-up of 200:

- ``lean``: the production path, ``LeanDeliverer.deliver`` (the request built and signed,
  the answer parsed, the attempt's result);
- ``<client>-bare``: the client alone, fixed headers, the answer's body read;
- ``<client>``: the client with the same per-delivery Python work as ``lean`` around it
  (the DeliveryRequest, its signed headers, the result), which is what adopting it means.

The Rust clients are not dependencies; install them to measure them (a client that is
not installed is reported as such):

    pip install pyreqwest==0.15.1 rnet==2.4.2 primp==2.0.1
    python benchmarks/bench_rust_http_clients.py [--requests 20000] [--concurrency 128]
                                                 [--rounds 2] [--clients lean,pyreqwest,...]

Prints one JSON line: per client, the CPU µs per delivery and deliveries per second of
each round (rounds interleave the clients). Needs nginx.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import resource
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from uuid import uuid4

from cronwire.adapters.http.attempt_timer import AttemptTimer
from cronwire.adapters.http.guard import TargetGuard
from cronwire.adapters.http.lean_deliverer import LeanDeliverer
from cronwire.adapters.http.target_url import parse_target
from cronwire.domain.delivery import (
    DeliveryRequest,
    delivery_headers,
    new_signing_secret,
    status_error,
    status_outcome,
)
from cronwire.harness.nginx_sink import NginxSink

CLIENTS = ("lean", "pyreqwest-bare", "pyreqwest", "rnet-bare", "rnet", "primp-bare", "primp")
RUST_PACKAGES = ("pyreqwest", "rnet", "primp")  # a client name starts with its package
BODY = b'{"schedule_id": "0b6f4a8e-4c1e-4f7e-9a53-2d3d5c1e9f00", "attempt": 1}'
FIXED_HEADERS = {"content-type": "application/json", "webhook-id": "msg_" + "x" * 36,
                 "webhook-timestamp": "1764745200", "webhook-signature": "v1," + "A" * 44}
Send = Callable[[str, dict[str, str], bytes], Awaitable[int]]


async def _rust_sender(package: str, concurrency: int) -> tuple[Send, Callable[[], Any]]:
    """``send(url, headers, body) -> status`` over one pooled client of ``package``, and
    its close. Redirects off, no proxy: the settings a deliverer would need."""
    if package == "pyreqwest":
        from pyreqwest.client import ClientBuilder

        client = await (ClientBuilder().max_connections(concurrency).follow_redirects(False)
                        .build().__aenter__())

        async def send_pyreqwest(url: str, headers: dict[str, str], body: bytes) -> int:
            response = await client.post(url).headers(headers).body_bytes(body).build().send()
            await response.bytes()
            return int(response.status)

        return send_pyreqwest, client.close
    if package == "rnet":
        import rnet

        rclient = rnet.Client(allow_redirects=False, no_proxy=True, timeout=10,
                              pool_max_idle_per_host=concurrency)

        async def send_rnet(url: str, headers: dict[str, str], body: bytes) -> int:
            response = await rclient.post(url, headers=headers, body=body)
            await response.bytes()
            return int(response.status)

        return send_rnet, _nothing
    import primp

    pclient = primp.AsyncClient(follow_redirects=False, timeout=10)

    async def send_primp(url: str, headers: dict[str, str], body: bytes) -> int:
        response = await pclient.post(url, headers=headers, content=body)
        return int(response.status_code)

    return send_primp, _nothing


async def _nothing() -> None:
    return None


def _request_maker(url: str) -> Callable[[int], DeliveryRequest]:
    secret, tenant = new_signing_secret(), uuid4()

    def request(n: int) -> DeliveryRequest:
        return DeliveryRequest(
            run_id=uuid4(), schedule_id=uuid4(), tenant_id=tenant, idempotency_key=f"b-{n}",
            scheduled_for=datetime.now(UTC), attempt=1, method="POST", url=url, headers={},
            body=BODY, signing_secrets=(secret,), timeout_seconds=10.0)

    return request


async def _one_client(name: str, url: str, total: int, concurrency: int) -> dict[str, Any]:
    request = _request_maker(url)
    close: Callable[[], Any]
    if name == "lean":
        deliverer = LeanDeliverer(TargetGuard(allow_private=True), max_connections=concurrency)
        await deliverer.start()
        close = deliverer.close

        async def one(n: int) -> int:
            return (await deliverer.deliver(request(n))).status_code or 0
    else:
        package, _, variant = name.partition("-")
        send, close = await _rust_sender(package, concurrency)
        if variant == "bare":
            async def one(n: int) -> int:
                return await send(url, FIXED_HEADERS, BODY)
        else:
            async def one(n: int) -> int:
                # what LeanDeliverer.deliver does around its own client
                req = request(n)
                timer = AttemptTimer()
                parse_target(req.url)
                headers = delivery_headers(req, int(timer.started_at.timestamp()),
                                           user_agent="cronwire-bench")
                status = await send(req.url, headers, req.body)
                return timer.result(status_outcome(status), status=status,
                                    error=status_error(status, "", None)).status_code or 0
    for n in range(200):
        await one(n)
    issued, statuses = 0, {}

    async def worker() -> None:
        nonlocal issued
        while issued < total:
            issued += 1
            status = await one(issued)
            statuses[status] = statuses.get(status, 0) + 1

    usage = resource.getrusage(resource.RUSAGE_SELF)
    cpu_began, began = usage.ru_utime + usage.ru_stime, time.monotonic()
    await asyncio.wait_for(asyncio.gather(*(worker() for _ in range(concurrency))), 300)
    elapsed = time.monotonic() - began
    usage = resource.getrusage(resource.RUSAGE_SELF)
    cpu = usage.ru_utime + usage.ru_stime - cpu_began
    await close()
    if statuses != {200: total}:
        raise SystemExit(f"bench: {name} answered {statuses}, not {total} x 200")
    return {"cpu_us_per_delivery": round(cpu / total * 1e6, 1),
            "deliveries_per_second": round(total / elapsed)}


def _child(args: argparse.Namespace) -> None:
    import uvloop

    print(json.dumps(uvloop.run(_one_client(args.child, args.url, args.requests,
                                            args.concurrency))))


def _installed(name: str) -> bool:
    package = name.partition("-")[0]
    return package not in RUST_PACKAGES or importlib.util.find_spec(package) is not None


async def _parent(args: argparse.Namespace) -> dict[str, Any]:
    clients = args.clients.split(",")
    unknown = [c for c in clients if c not in CLIENTS]
    if unknown:
        raise SystemExit(f"bench: unknown client {unknown[0]!r}; one of {', '.join(CLIENTS)}")
    with tempfile.TemporaryDirectory(prefix="cronwire-rust-http-") as tmp:
        sink = await NginxSink(Path(tmp), log_requests=False, workers="1").start()
        try:
            result: dict[str, Any] = {
                name: {"cpu_us_per_delivery": [], "deliveries_per_second": []}
                if _installed(name) else "not installed" for name in clients}
            for _ in range(args.rounds):
                for name in clients:
                    if not _installed(name):
                        continue
                    proc = await asyncio.create_subprocess_exec(
                        sys.executable, __file__, "--child", name, "--url", sink.url,
                        "--requests", str(args.requests), "--concurrency", str(args.concurrency),
                        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
                    out, err = await asyncio.wait_for(proc.communicate(), 600)
                    if proc.returncode != 0:
                        raise SystemExit(f"bench: {name} failed: {err.decode()[-1500:]}")
                    for key, value in json.loads(out.decode().strip().splitlines()[-1]).items():
                        result[name][key].append(value)
        finally:
            sink.stop()
    return {"requests": args.requests, "concurrency": args.concurrency,
            "rounds": args.rounds, "sink": "nginx, 1 worker", "clients": result}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--concurrency", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--clients", default=",".join(CLIENTS))
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args)
        return
    print(json.dumps(asyncio.run(_parent(args))), flush=True)


if __name__ == "__main__":
    main()
