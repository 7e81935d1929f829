"""Run-history latency: N runs across S schedules (of T tenants) in three monthly
partitions, then p50/p95/p99 of two requests through the real API handler path
(httpx + ASGI transport into the FastAPI app: bearer auth, validation, the query,
serialisation), one request at a time, after a short warm-up:

  (a) "schedule_page": the first page (50 runs) of one schedule's history,
      GET /v1/runs?schedule_id=...;
  (b) "window": a one-hour since/until window of a tenant's history (at a random
      instant, moved back so it holds at least one run), GET /v1/runs?since=...&until=....

Prints one JSON line. Every sampled page is also compared with a direct SQL query of the
same rows; a mismatch exits non-zero.

    python benchmarks/bench_history.py [--runs 1000000] [--schedules 1000] [--tenants 10]
                                       [--samples 300] [--dsn postgresql://...]

Without --dsn an embedded Postgres (durable settings, fsync on) runs in a temp dir. The
runs fill the three whole months before the current one, so exactly three partitions
hold them whatever the date.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import asyncpg
import httpx

from cronwire.adapters.embedded.postgres import run_on_database
from cronwire.adapters.http.guard import TargetGuard
from cronwire.adapters.postgres.migrator import migrate
from cronwire.adapters.postgres.pool import create_pool
from cronwire.adapters.postgres.run_commands import PostgresRunCommands
from cronwire.adapters.postgres.run_history import PostgresRunHistory
from cronwire.adapters.postgres.schedule_store import PostgresScheduleStore
from cronwire.adapters.postgres.tenants import PostgresTenantStore
from cronwire.adapters.postgres.token_store import PostgresTokenStore
from cronwire.api.app import build_tenant_routers, create_app
from cronwire.api.context import ApiContext
from cronwire.bootstrap.factories import secret_box as harness_box
from cronwire.bootstrap.runtime import default_limits
from cronwire.config import Settings
from cronwire.harness.fleet import HARNESS_SECRET_KEYS

PAGE = 50
WARMUP = 20
STATUSES = ["succeeded"] * 17 + ["failed", "skipped", "cancelled"]

INSERT_SCHEDULES = """
INSERT INTO schedule (id, tenant_id, name, cron, target, retry, signing_secret, next_fire_at)
SELECT s.id, s.tenant_id, 'bench', '*/5 * * * *', '{"url": "http://127.0.0.1:9/"}',
       '{"max_attempts": 3, "initial_backoff_seconds": 10, "max_backoff_seconds": 3600}',
       'whsec_bench', NULL
FROM unnest($1::uuid[], $2::uuid[]) AS s(id, tenant_id)
"""
# Each schedule's runs are spread evenly over [$1, $1 + $3), shifted by a per-schedule
# offset so schedules do not all share instants; statuses mostly terminal, as history is.
INSERT_RUNS = """
INSERT INTO job_run (id, tenant_id, schedule_id, scheduled_for, idempotency_key, status,
                     attempt_count, fire_after, first_attempt_at, finished_at,
                     last_status_code)
SELECT gen_random_uuid(), s.tenant_id, s.id, at, 'bench', st, 1, at, at, at + interval '80 ms',
       CASE WHEN st = 'succeeded' THEN 200 WHEN st = 'failed' THEN 500 END
FROM (SELECT id, tenant_id, row_number() OVER (ORDER BY id) AS n
      FROM schedule WHERE name = 'bench') AS s,
     generate_series(0, $2 - 1) AS g,
     LATERAL (SELECT $1::timestamptz + (g + s.n::float8 / ($4 + 1)) * ($3::interval / $2)
                     AS at) AS t,
     LATERAL (SELECT ($5::text[])[1 + ((g * 7 + s.n) % cardinality($5::text[]))]::text
                     AS st) AS x
"""


@dataclass(frozen=True)
class Seeded:
    tokens: dict[uuid.UUID, str]  # tenant -> bearer token
    schedules: list[tuple[uuid.UUID, uuid.UUID]]  # (tenant, schedule)
    start: datetime
    end: datetime
    seconds: float


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=1_000_000)
    parser.add_argument("--schedules", type=int, default=1000)
    parser.add_argument("--tenants", type=int, default=10)
    parser.add_argument("--samples", type=int, default=300, help="timed requests per kind")
    parser.add_argument("--dsn", help="an existing database (default: embedded Postgres)")
    args = parser.parse_args(argv)
    if args.schedules < args.tenants or args.runs < args.schedules:
        parser.error("need runs >= schedules >= tenants")
    return args


async def seed(pool: asyncpg.Pool, args: argparse.Namespace) -> Seeded:
    started = time.perf_counter()
    start: datetime = await pool.fetchval(
        "SELECT date_trunc('month', now()) - interval '3 months'")
    end: datetime = await pool.fetchval("SELECT date_trunc('month', now())")
    await pool.execute("SELECT cronwire_ensure_partitions($1::date, 3)", start.date())
    tenants = PostgresTenantStore(pool)
    tokens: dict[uuid.UUID, str] = {}
    for i in range(args.tenants):
        issued = await tenants.create(f"bench-{i}")
        tokens[issued.tenant_id] = issued.token
    owners = list(tokens)
    schedules = [(owners[i % len(owners)], uuid.uuid4()) for i in range(args.schedules)]
    await pool.execute(INSERT_SCHEDULES, [s for _, s in schedules], [t for t, _ in schedules])
    per_schedule = args.runs // args.schedules
    await pool.execute(INSERT_RUNS, start, per_schedule, end - start, args.schedules, STATUSES,
                       timeout=3600)
    await pool.execute("VACUUM (ANALYZE) job_run", timeout=3600)
    return Seeded(tokens, schedules, start, end, time.perf_counter() - started)


def percentiles(samples: list[float]) -> dict[str, float]:
    cuts = statistics.quantiles(samples, n=100, method="inclusive")
    return {"p50_ms": round(cuts[49], 2), "p95_ms": round(cuts[94], 2),
            "p99_ms": round(cuts[98], 2)}


async def expected_page(pool: asyncpg.Pool, where: str, *args: Any) -> list[str]:
    rows = await pool.fetch(
        f"SELECT id FROM job_run WHERE {where} ORDER BY scheduled_for DESC, id DESC "
        f"LIMIT {PAGE}", *args)
    return [str(r["id"]) for r in rows]


async def measure(client: httpx.AsyncClient, pool: asyncpg.Pool, seeded: Seeded,
                  samples: int, rng: random.Random) -> dict[str, Any]:
    timings: dict[str, list[float]] = {"schedule_page": [], "window": []}
    checked = 0
    hour = timedelta(hours=1)
    span_hours = int((seeded.end - seeded.start) / hour) - 1
    for i in range(WARMUP + samples):
        tenant, schedule = rng.choice(seeded.schedules)
        headers = {"Authorization": f"Bearer {seeded.tokens[tenant]}"}
        # A random hour that holds at least one of the tenant's runs (found outside the
        # timing), so small seeds, with sparse tenants, still time real pages.
        probe = seeded.start + rng.randrange(span_hours) * hour
        first: datetime = await pool.fetchval(
            "SELECT min(scheduled_for) FROM job_run WHERE schedule_id = $1 "
            "AND scheduled_for >= $2", schedule, probe) or await pool.fetchval(
            "SELECT max(scheduled_for) FROM job_run WHERE schedule_id = $1", schedule)
        since = first - timedelta(seconds=rng.randrange(3600))
        requests = {
            "schedule_page": ({"schedule_id": str(schedule), "limit": PAGE},
                              "schedule_id = $1", (schedule,)),
            "window": ({"since": since.isoformat(), "until": (since + hour).isoformat(),
                        "limit": PAGE},
                       "tenant_id = $1 AND scheduled_for >= $2 AND scheduled_for < $3",
                       (tenant, since, since + hour)),
        }
        for kind, (params, where, args) in requests.items():
            began = time.perf_counter()
            response = await client.get("/v1/runs", params=params, headers=headers)
            elapsed_ms = (time.perf_counter() - began) * 1000
            if response.status_code != 200:
                raise SystemExit(f"bench: {kind} answered {response.status_code}: "
                                 f"{response.text[:300]}")
            items = [item["id"] for item in response.json()["items"]]
            if not items:
                raise SystemExit(f"bench: {kind} page {params} is empty")
            if i < WARMUP:
                continue
            timings[kind].append(elapsed_ms)
            if i % 10 == 0:  # check a sample of pages against SQL (outside the timing)
                if items != await expected_page(pool, where, *args):
                    raise SystemExit(f"bench: {kind} page {params} differs from SQL")
                checked += 1
    return {kind: percentiles(values) for kind, values in timings.items()} | {
        "pages_checked_against_sql": checked}


async def bench(dsn: str, args: argparse.Namespace) -> dict[str, Any]:
    await migrate(dsn)
    pool = await create_pool(dsn, 4)
    try:
        seeded = await seed(pool, args)
        total = await pool.fetchval("SELECT count(*) FROM job_run")
        partitions = await pool.fetchval(
            """SELECT count(DISTINCT tableoid) FROM job_run
               WHERE scheduled_for >= $1 AND scheduled_for < $2""", seeded.start, seeded.end)
        ctx = ApiContext(
            tokens=PostgresTokenStore(pool),
            schedules=PostgresScheduleStore(pool, harness_box(pool, HARNESS_SECRET_KEYS)),
            runs=PostgresRunHistory(pool),
            commands=PostgresRunCommands(pool),
            check_url=TargetGuard(allow_private=True).check_url,
            default_limits=default_limits(Settings()),
        )
        app = create_app(_ready, lambda: b"", build_tenant_routers(ctx))
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                     base_url="http://cronwire") as client:
            latencies = await measure(client, pool, seeded, args.samples, random.Random(5))
    finally:
        await pool.close()
    return {
        "runs": total,
        "schedules": args.schedules,
        "tenants": args.tenants,
        "partitions": partitions,
        "seed_seconds": round(seeded.seconds, 1),
        "samples": args.samples,
        "path": "httpx ASGITransport -> FastAPI app (auth + query + JSON)",
        **{f"{kind}_{name}": value for kind, cuts in latencies.items()
           if isinstance(cuts, dict) for name, value in cuts.items()},
        "pages_checked_against_sql": latencies["pages_checked_against_sql"],
    }


async def _ready() -> dict[str, bool]:
    return {}


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    result = run_on_database(args.dsn, lambda dsn: bench(dsn, args))
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    sys.exit(main())
