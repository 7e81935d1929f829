"""Where the stats query's time goes, and whether a histogram beats the two sorts
(ADR 0036). Seeds the same data as bench_stats.py (one schedule with N runs in the 30-day
window among other schedules' runs), then times alternative shapes of the window
aggregate, interleaved round by round on one connection so that each shape sees the same
machine load, without parallel workers (the stats query gets none: ordered-set
aggregates have no partial form):

- counts_only: the index-only scan and the four status counts, no percentile (the floor
  of any single pass over the window);
- counts_lag_expr: the same plus the fire-lag expression summed (its per-row cost);
- sorts: the window query the API ran until kept days (counts and two percentile_disc
  sorts, exact);
- day_values: the API's job_run_stats_values over the whole window (what a request pays
  when no closed day is kept yet: a hashed pass per day, status, lag and duration);
- hash_histogram_int: the counts and both histograms in the same pass, one hashed
  GROUPING SETS (status, lag, duration) and one count(*), on whole milliseconds (the
  cheapest hash histogram: no bounded-error bucketing at all);
- hash_histogram_log: the same on log-scale buckets of 2 % width (relative error <= 1 %).

    python benchmarks/bench_stats_shapes.py [--runs 100000] [--other-runs 200000]
                                            [--rounds 40] [--dsn postgresql://...]

Prints one JSON line: per shape the min, median and p95 of the statement's wall time in
ms (asyncpg round trip on loopback). min approximates its CPU cost; the median and p95
include the machine's contention.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_stats  # the seeding is shared with the API benchmark

from cronwire.adapters.embedded.postgres import run_on_database
from cronwire.adapters.postgres.migrator import migrate
from cronwire.adapters.postgres.pool import create_pool
from cronwire.adapters.postgres.sql import queries

WINDOW = """FROM job_run
 WHERE schedule_id = $1 AND status IN ('succeeded', 'failed', 'skipped', 'cancelled')
   AND scheduled_for > now() - make_interval(secs => $2) AND scheduled_for <= now()"""
LAG = "date_part('epoch', first_attempt_at - scheduled_for) * 1000"
COUNTS = """count(*) FILTER (WHERE status = 'succeeded') AS succeeded,
       count(*) FILTER (WHERE status = 'failed') AS failed,
       count(*) FILTER (WHERE status = 'skipped') AS skipped,
       count(*) FILTER (WHERE status = 'cancelled') AS cancelled"""
# ln(1.02): buckets 2 % wide, so a bucket's geometric middle is within 1 % of its members.
LOG_BUCKET = ("CASE WHEN {x} >= 1 THEN floor(ln({x}) / 0.0198026)::int"
              " WHEN {x} IS NOT NULL THEN -1 END")
SHAPES: dict[str, str] = {
    "counts_only": f"SELECT {COUNTS} {WINDOW}",
    "counts_lag_expr": f"SELECT {COUNTS}, sum({LAG}) AS lag {WINDOW}",
    "sorts": f"""
SELECT {COUNTS},
       percentile_disc(ARRAY[0.5, 0.95, 0.99]) WITHIN GROUP (ORDER BY {LAG}) AS lag_ms,
       percentile_disc(ARRAY[0.5, 0.95, 0.99]) WITHIN GROUP (ORDER BY last_duration_ms)
           AS duration_ms
  {WINDOW}""",
    "day_values": queries()["job_run_stats_values"].replace(
        "scheduled_for >= $2 AND scheduled_for < $3",
        "scheduled_for > now() - make_interval(secs => $2) AND scheduled_for <= now()",
    ).replace("$4::interval", "'1 day'::interval").replace("$5::interval", "'1 minute'::interval"),
    "hash_histogram_int": f"""
SELECT status, lag, dur, count(*) AS n
  FROM (SELECT status, ({LAG})::int AS lag, last_duration_ms AS dur {WINDOW}) AS r
 GROUP BY GROUPING SETS ((status), (lag), (dur))""",
    "hash_histogram_log": f"""
SELECT status, lag, dur, count(*) AS n
  FROM (SELECT status, {LOG_BUCKET.format(x='l')} AS lag,
               {LOG_BUCKET.format(x='last_duration_ms')} AS dur
          FROM (SELECT status, {LAG} AS l, last_duration_ms {WINDOW} OFFSET 0) AS v) AS r
 GROUP BY GROUPING SETS ((status), (lag), (dur))""",
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--other-runs", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--dsn", help="an existing database (default: embedded Postgres)")
    return parser.parse_args(argv)


async def bench(dsn: str, args: argparse.Namespace) -> dict[str, Any]:
    await migrate(dsn)
    pool = await create_pool(dsn, 2)
    try:
        seed_args = bench_stats.parse_args(["--runs", str(args.runs),
                                            "--other-runs", str(args.other_runs)])
        _, schedule, _ = await bench_stats.seed(pool, seed_args)
        timings: dict[str, list[float]] = {name: [] for name in SHAPES}
        async with pool.acquire() as conn:
            await conn.execute("SET max_parallel_workers_per_gather = 0")
            for round_ in range(args.rounds + 2):
                for name, sql in SHAPES.items():
                    began = time.perf_counter()
                    await conn.fetch(sql, schedule, 30 * 86_400.0)
                    if round_ >= 2:  # two warm-up rounds
                        timings[name].append((time.perf_counter() - began) * 1000)
    finally:
        await pool.close()
    return {"runs_in_window": args.runs, "rounds": args.rounds, **{
        name: {"min_ms": round(min(t), 1), "median_ms": round(statistics.median(t), 1),
               "p95_ms": round(statistics.quantiles(t, n=20, method="inclusive")[18], 1)}
        for name, t in timings.items()}}


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    result = run_on_database(args.dsn, lambda dsn: bench(dsn, args))
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    sys.exit(main())
