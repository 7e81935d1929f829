"""What `cronwire loadtest --compare` measures beside cronwire, each in its own process:

- ``bound-db``: the least a SKIP LOCKED queue must do per run (a batched claim and a
  batched terminal write, no HTTP, no bookkeeping);
- ``aiohttp-http``: a bare aiohttp client posting delivery-sized webhooks to the sink (no
  database); for reference beside the C programs' HTTP half (http_bound.py), and that
  half itself only where wrk or nginx is missing;
- ``pgqueuer``: pgqueuer doing the same job as cronwire (dequeue, POST to the sink, mark
  done) in each configuration of ``PGQ_CONFIGS`` (its driver on one connection or on a
  pool, its batch and its jobs in flight; one shared aiohttp session, uvloop), the best
  one kept: a peer is compared at its best.

    python -m cronwire.loadtest.baselines bound-db --dsn DSN --jobs N
    python -m cronwire.loadtest.baselines aiohttp-http --sink URL --jobs N [--workers 256]
    python -m cronwire.loadtest.baselines pgqueuer-enqueue --dsn DSN --jobs N
    python -m cronwire.loadtest.baselines pgqueuer-worker --dsn DSN --sink URL \
        [--driver pool|connection] [--batch 100] [--in-flight 1000]

Each measuring command prints one JSON line with ``runs_per_second``. The bound of the
whole job is 1 / (1/db + 1/http): one run costs its database share plus its HTTP share.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
import uuid
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import aiohttp
import asyncpg

from cronwire.bootstrap.factories import harness_queries
from cronwire.loadtest.http_bound import delivery_sized_request

Q = harness_queries(Path(__file__).with_name("bound.sql"))
CLAIM_BATCH = 500
CLAIMERS = 4  # concurrent claim loops, so one claim's round trip overlaps another's write
PGQ_ENTRYPOINT = "deliver"


@dataclass(frozen=True, slots=True)
class PgqConfig:
    """One configuration of pgqueuer's worker, as its documentation allows."""

    driver: str  # "pool": AsyncpgPoolDriver; "connection": AsyncpgDriver on one connection
    batch: int
    in_flight: int
    # worker processes for each of cronwire's replicas: one pgqueuer worker is a single
    # Python process, CPU-bound on one core, where a replica is not (its Postgres work is
    # in Postgres's processes), so pgqueuer at its best may want more of them
    processes: int = 1

    def __str__(self) -> str:
        workers = f" x {self.processes} processes" if self.processes != 1 else ""
        return f"{self.driver}/batch {self.batch}/{self.in_flight} in flight{workers}"

    def args(self) -> list[str]:
        return ["--driver", self.driver, "--batch", str(self.batch),
                "--in-flight", str(self.in_flight)]

    @property
    def sink_name(self) -> str:
        """The directory of its sink in --out (the number of processes shares it)."""
        return f"pgqueuer-{self.driver}-{self.batch}"


@dataclass(frozen=True, slots=True)
class PgqMeasure:
    """What one configuration did: jobs/s, and CPU per acknowledged job (µs) of its
    workers, of Postgres and of the sink (None where it could not be measured)."""

    config: PgqConfig
    jobs_per_second: float
    worker_us: float | None = None
    postgres_us: float | None = None
    sink_us: float | None = None

    def split(self) -> dict[str, float]:
        """The measured parts of the CPU per job, by who spent it."""
        parts = {"worker": self.worker_us, "postgres": self.postgres_us, "sink": self.sink_us}
        return {who: round(us, 1) for who, us in parts.items() if us is not None}

    def cpu_note(self) -> str:
        """One line of the split, or "" when nothing was measured."""
        parts = [f"{who} {us:,.0f}" for who, us in self.split().items()]
        return f"µs of CPU per job: {', '.join(parts)}" if parts else ""


# Swept by --compare, the best kept. The pool and a batch of 100 with 1,000 in flight was
# pgqueuer's best measured by hand here (5,799-6,122 jobs/s against 2,654 on one
# connection in the same hour); the others bracket it. On 2026-12-06 a batch of 250 did
# best (4,918-5,432 jobs/s), its worker at 173-198 µs of CPU per job: one core, full;
# hence two processes per replica too.
PGQ_CONFIGS = (
    PgqConfig("pool", 100, 1000),
    PgqConfig("pool", 250, 2500),
    PgqConfig("connection", 100, 1000),
    PgqConfig("pool", 250, 2500, processes=2),
)


def combined_bound(db_per_second: float, http_per_second: float) -> float:
    """Runs/s when each run costs its database share and its HTTP share in turn."""
    if db_per_second <= 0 or http_per_second <= 0:
        return 0.0
    return 1.0 / (1.0 / db_per_second + 1.0 / http_per_second)


def _requests(jobs: int) -> list[tuple[dict[str, str], bytes]]:
    """What cronwire sends (http_bound.delivery_sized_request), each with a webhook-id of
    its own."""
    _method, headers, body = delivery_sized_request()
    return [({**headers, "webhook-id": f"msg_{uuid.uuid4().hex}"}, body) for _ in range(jobs)]


async def bound_db(dsn: str, jobs: int) -> dict[str, object]:
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(Q["bound_create"])
        await conn.execute(Q["bound_index"])
        await conn.execute(Q["bound_fill"], jobs)
        await conn.execute("ANALYZE bound_job")
    finally:
        await conn.close()
    pool = await asyncpg.create_pool(dsn, min_size=CLAIMERS, max_size=CLAIMERS)
    assert pool is not None
    done = 0

    async def claimer(owner: str) -> None:
        nonlocal done
        while True:
            rows = await pool.fetch(Q["bound_claim"], owner, CLAIM_BATCH)
            if not rows:
                return
            await pool.execute(Q["bound_finish"], owner, [r["id"] for r in rows])
            done += len(rows)

    try:
        began = time.perf_counter()
        await asyncio.gather(*(claimer(f"bound-{n}") for n in range(CLAIMERS)))
        seconds = time.perf_counter() - began
    finally:
        await pool.close()
    return {"baseline": "bound-db", "jobs": done, "seconds": round(seconds, 3),
            "runs_per_second": round(done / seconds, 1)}


async def aiohttp_http(sink: str, jobs: int, workers: int) -> dict[str, object]:
    requests = _requests(jobs)
    connector = aiohttp.TCPConnector(limit=workers)
    async with aiohttp.ClientSession(connector=connector) as session:
        queue = iter(requests)

        async def worker() -> None:
            for headers, body in queue:
                async with session.post(sink, headers=headers, data=body) as response:
                    await response.read()

        began, cpu_began = time.perf_counter(), time.process_time()
        await asyncio.gather(*(worker() for _ in range(workers)))
        seconds, cpu = time.perf_counter() - began, time.process_time() - cpu_began
    return {"baseline": "aiohttp-http", "jobs": jobs, "seconds": round(seconds, 3),
            "runs_per_second": round(jobs / seconds, 1),
            "cpu_us_per_run": round(cpu / jobs * 1e6, 1)}


async def pgqueuer_enqueue(dsn: str, jobs: int) -> dict[str, object]:
    """Install pgqueuer's schema if needed and enqueue ``jobs`` jobs in one statement."""
    from pgqueuer.db import AsyncpgDriver
    from pgqueuer.queries import Queries

    conn = await asyncpg.connect(dsn)
    try:
        queries = Queries(AsyncpgDriver(conn))
        if not await queries.has_table("pgqueuer"):
            await queries.install()
        if jobs == 0:
            return {"baseline": "pgqueuer-install"}
        payloads: list[bytes | None] = [json.dumps({"job": n}).encode() for n in range(jobs)]
        await queries.enqueue([PGQ_ENTRYPOINT] * jobs, payloads, [0] * jobs)
    finally:
        await conn.close()
    return {"baseline": "pgqueuer-enqueue", "jobs": jobs}


async def pgqueuer_worker(dsn: str, sink: str, config: PgqConfig) -> None:
    """A pgqueuer consumer that POSTs every job to the sink, until SIGTERM."""
    import signal

    from pgqueuer import PgQueuer
    from pgqueuer.db import AsyncpgDriver, AsyncpgPoolDriver
    from pgqueuer.models import Job

    pool: asyncpg.Pool | None = None
    conn: asyncpg.Connection | None = None
    if config.driver == "pool":
        pool = await asyncpg.create_pool(dsn, min_size=2, max_size=10)
        driver: AsyncpgDriver | AsyncpgPoolDriver = AsyncpgPoolDriver(pool)
    else:
        conn = await asyncpg.connect(dsn)
        driver = AsyncpgDriver(conn)
    connector = aiohttp.TCPConnector(limit=config.in_flight)
    session = aiohttp.ClientSession(connector=connector)
    pgq = PgQueuer(driver)

    @pgq.entrypoint(PGQ_ENTRYPOINT)  # type: ignore[untyped-decorator,unused-ignore]
    async def deliver(job: Job) -> None:
        headers = {"webhook-id": f"pgq_{job.id}", "content-type": "application/json"}
        async with session.post(sink, headers=headers, data=job.payload) as response:
            await response.read()
            response.raise_for_status()

    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, pgq.shutdown.set)
    try:
        await pgq.run(batch_size=config.batch, max_concurrent_tasks=config.in_flight,
                      dequeue_timeout=timedelta(seconds=1))
    finally:
        await session.close()
        if pool is not None:
            await pool.close()
        if conn is not None:
            await conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("what", choices=["bound-db", "aiohttp-http", "pgqueuer-enqueue",
                                         "pgqueuer-worker"])
    parser.add_argument("--dsn")
    parser.add_argument("--sink")
    parser.add_argument("--jobs", type=int, default=0)
    parser.add_argument("--workers", type=int, default=256)
    parser.add_argument("--driver", choices=["pool", "connection"], default="pool")
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--in-flight", type=int, default=1000)
    args = parser.parse_args()
    import uvloop

    if args.what == "bound-db":
        result = uvloop.run(bound_db(args.dsn, args.jobs))
    elif args.what == "aiohttp-http":
        result = uvloop.run(aiohttp_http(args.sink, args.jobs, args.workers))
    elif args.what == "pgqueuer-enqueue":
        result = uvloop.run(pgqueuer_enqueue(args.dsn, args.jobs))
    else:
        uvloop.run(pgqueuer_worker(args.dsn, args.sink,
                                   PgqConfig(args.driver, args.batch, args.in_flight)))
        return
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
