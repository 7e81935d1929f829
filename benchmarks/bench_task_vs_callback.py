"""What a delivery's task costs the event loop, against a callback on its answer's future
(docs/benchmarks.md#levers): N futures, each awaited by a task through a chain of coroutines as deep as the
executor's was (Deliveries._deliver -> _attempt -> deliver -> _exchange -> _send), by a
task awaiting it directly, or handled by a done-callback. Completed in order; CPU per
future from ``time.process_time``. uvloop, as the replica runs. Prints one JSON line.

    python benchmarks/bench_task_vs_callback.py [--futures 100000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from typing import Any

import uvloop


async def _level4(f: asyncio.Future[int]) -> int:
    return await f


async def _level3(f: asyncio.Future[int]) -> int:
    return await _level4(f)


async def _level2(f: asyncio.Future[int]) -> int:
    return await _level3(f)


async def _chain(f: asyncio.Future[int], out: list[int]) -> None:
    out.append(await _level2(f))


async def _direct(f: asyncio.Future[int], out: list[int]) -> None:
    out.append(await f)


async def _one(kind: str, n: int) -> float:
    loop = asyncio.get_running_loop()
    out: list[int] = []
    futures: list[asyncio.Future[int]] = [loop.create_future() for _ in range(n)]
    tasks: list[asyncio.Task[None]] = []
    began = time.process_time()
    if kind == "callback":
        for f in futures:
            f.add_done_callback(lambda done: out.append(done.result()))
    else:
        body = _chain if kind == "task-chain" else _direct
        tasks = [loop.create_task(body(f, out)) for f in futures]
        await asyncio.sleep(0)  # every task is waiting on its future
    for f in futures:
        f.set_result(1)
    for _ in range(10):  # each kind ends within a few loop turns
        if len(out) == n:
            break
        await asyncio.sleep(0)
    assert len(out) == n and all(t.done() for t in tasks)
    return (time.process_time() - began) / n * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--futures", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    result: dict[str, Any] = {"futures": args.futures}
    for kind in ("task-chain", "task", "callback"):
        result[f"{kind}_us"] = [round(uvloop.run(_one(kind, args.futures)), 2)
                                for _ in range(args.rounds)]
    print(json.dumps(result))


if __name__ == "__main__":
    main()
