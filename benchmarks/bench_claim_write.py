"""The database half of a burst without HTTP: ``--runs`` due runs claimed and written back
by ``--claimers`` loops in claims of ``--batch``, in four shapes (ADR 0042 and docs/benchmarks.md#levers):

- ``production``: ``PostgresClaimSource.claim`` and ``PostgresRunStore.resolve``, every
  rule of the lease, fairness, flow control and the overlap gate included;
- ``status``: the same two writes reduced to the lease: the status moved to 'running' and
  then to 'succeeded' by two updates, with the attempt row (bench_claim_write.sql);
- ``lease-table``: the lease in a table beside ``job_run``: the claim an insert there,
  the write a delete there and one update of ``job_run``;
- ``hot-lease``: the lease in columns no index reads, the status left 'pending' by the
  claim, pages with room (``--fillfactor``): the claim can be a heap-only update, writing
  no index entry (docs/benchmarks.md#levers).

``--prepare`` is what the table had before the first claim: ``none`` (as the planner
leaves a burst it has just written: no statistics, no hint bits), ``analyze``, or
``vacuum`` (VACUUM ANALYZE). Each round uses a fresh database with ``--runs`` schedules of
one tenant, one run each, all due. Prints one JSON line per round: runs/s, the CPU of
every Postgres process per run (/proc; where the server is not local, null), WAL bytes
per run, the share of job_run's updates that were heap-only, and the counts that show
each run was written once (the script fails otherwise).

    python benchmarks/bench_claim_write.py [--runs 100000] [--claimers 2] [--batch 128]
        [--shapes production,status,lease-table,hot-lease] [--prepare none] [--rounds 1]
        [--fillfactor 50] [--dsn postgresql://...]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import asyncpg

from cronwire.adapters.embedded.postgres import run_on_database
from cronwire.adapters.postgres.claim_source import PostgresClaimSource
from cronwire.adapters.postgres.run_store import PostgresRunStore
from cronwire.bootstrap.factories import fresh_database, harness_queries, open_pool
from cronwire.bootstrap.factories import secret_box as harness_box
from cronwire.domain.documents import retry_to_document, target_to_document
from cronwire.domain.model import AttemptRecord, RetryPolicy, RunResolution, RunStatus, Target
from cronwire.harness.fleet import HARNESS_SECRET_KEYS
from cronwire.harness.seeding import db_now, seed_firing_schedules, seed_tenant
from cronwire.harness.stats import per_run_us, server_cpu_seconds

Q = harness_queries(Path(__file__).with_suffix(".sql"))
SHAPES = ("production", "status", "lease-table", "hot-lease")
PREFIX = {"status": "bench_status", "lease-table": "bench_lease", "hot-lease": "bench_hot"}
PREPARE = {"none": None, "analyze": "ANALYZE job_run", "vacuum": "VACUUM ANALYZE job_run"}
LEASE_SECONDS = 30.0
HOT_FILLFACTOR = 50  # every claim heap-only in a burst (at 80, about a quarter of them)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--claimers", type=int, default=2, help="claim loops at once")
    parser.add_argument("--batch", type=int, default=128, help="runs per claim")
    parser.add_argument("--shapes", default=",".join(SHAPES))
    parser.add_argument("--prepare", choices=tuple(PREPARE), default="none")
    parser.add_argument("--rounds", type=int, default=1, help="every shape once per round")
    parser.add_argument("--fillfactor", type=int, default=None,
                        help="job_run partitions' fillfactor, 10-100 (default: 100; 50 for "
                             "hot-lease, whose claim needs the room)")
    parser.add_argument("--dsn", help="a server to make the databases on (default: embedded)")
    args = parser.parse_args(argv)
    args.shapes = [s for s in args.shapes.split(",") if s]
    unknown = set(args.shapes) - set(SHAPES)
    if unknown:
        parser.error(f"--shapes: unknown {sorted(unknown)}; choose from {list(SHAPES)}")
    if args.fillfactor is not None and not 10 <= args.fillfactor <= 100:
        parser.error(f"--fillfactor: {args.fillfactor} is not between 10 and 100")
    return args


class Production:
    """The replica's own claim and terminal write."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._source, self._store = PostgresClaimSource(pool, harness_box(pool, HARNESS_SECRET_KEYS)), PostgresRunStore(pool)

    async def claim_and_write(self, owner: str, batch: int) -> int:
        runs = (await self._source.claim(owner, batch, LEASE_SECONDS)).runs
        if runs:
            when = runs[0].lease_expires_at - timedelta(seconds=LEASE_SECONDS)
            await self._store.resolve(owner, [
                RunResolution(r.id, r.scheduled_for, RunStatus.SUCCEEDED, r.attempt, None, 200,
                              None, AttemptRecord(r.id, r.scheduled_for, r.tenant_id,
                                                  r.attempt, when, when, "success", 200,
                                                  None, 1, None), r.lease_generation)
                for r in runs])
        return len(runs)


class Reduced:
    """One of bench_claim_write.sql's two shapes. A statement Postgres ends as a deadlock's
    victim is run again and counted: the lease-table shape meets them (a claim's insert
    waits for a write's uncommitted delete of the same key while that write waits for the
    claim's row lock), and their cost, a deadlock_timeout each, is part of its figure."""

    def __init__(self, pool: asyncpg.Pool, shape: str) -> None:
        self._pool = pool
        prefix = PREFIX[shape]
        self._claim, self._write = Q[f"{prefix}_claim"], Q[f"{prefix}_write"]
        self.deadlocks = 0

    async def claim_and_write(self, owner: str, batch: int) -> int:
        rows = await self._again_after_deadlock(self._pool.fetch, self._claim, owner, batch)
        if rows:
            await self._again_after_deadlock(
                self._pool.execute, self._write, owner, [r["id"] for r in rows],
                [r["scheduled_for"] for r in rows], [r["lease_generation"] for r in rows])
        return len(rows)

    async def _again_after_deadlock(self, call: Any, *args: Any) -> Any:
        for _ in range(100):
            try:
                return await call(*args)
            except asyncpg.DeadlockDetectedError:
                self.deadlocks += 1
        raise SystemExit("a statement was a deadlock's victim 100 times in a row")


async def seeded(admin_dsn: str, runs: int, shape: str, fillfactor: int) -> str:
    """A fresh database with ``runs`` schedules and one due run each."""
    dsn = await fresh_database(admin_dsn, f"bench_claim_write_{uuid.uuid4().hex[:10]}")
    pool = await open_pool(dsn, 2)
    try:
        tenant = await seed_tenant(pool, "bench")
        now = await db_now(pool)
        later = now + timedelta(hours=1)  # the planner is not running: never fired
        await seed_firing_schedules(
            pool, tenant, runs, cron="0 0 * * * *",
            target=target_to_document(Target("http://127.0.0.1:9/")),
            retry=retry_to_document(RetryPolicy(5, 1.0, 30.0)), first=later, ends_at=later,
            name="bench-")
        if shape == "hot-lease":
            await pool.execute(Q["bench_hot_prepare"])
        if fillfactor != 100:  # before the runs are written: the room is made then
            async with pool.acquire() as conn:
                await conn.execute(f"SET cronwire.bench_fillfactor = {fillfactor:d}")
                await conn.execute(Q["bench_fillfactor"])
        await pool.execute(Q["bench_runs_for_schedules"], now - timedelta(seconds=1))
        await pool.execute("VACUUM ANALYZE schedule")
        if shape == "lease-table":
            await pool.execute(Q["bench_lease_table"])
    finally:
        await pool.close()
    return dsn


async def one_round(admin_dsn: str, shape: str, args: argparse.Namespace) -> dict[str, Any]:
    fillfactor = args.fillfactor or (HOT_FILLFACTOR if shape == "hot-lease" else 100)
    dsn = await seeded(admin_dsn, args.runs, shape, fillfactor)
    pool = await open_pool(dsn, args.claimers + 1)
    try:
        if PREPARE[args.prepare]:
            await pool.execute(PREPARE[args.prepare])
        await pool.execute("CHECKPOINT")  # no checkpoint's page images inside the window
        # The backend's parent is the server's root process, when the server is local.
        backend = await pool.fetchval("SELECT pg_backend_pid()")
        root = _parent(backend)
        lsn = await pool.fetchval("SELECT pg_current_wal_lsn()")
        shaped = Production(pool) if shape == "production" else Reduced(pool, shape)
        done = 0

        async def claimer(owner: str) -> None:
            nonlocal done
            while taken := await shaped.claim_and_write(owner, args.batch):
                done += taken

        cpu_before = server_cpu_seconds(root) if root else None
        began = time.perf_counter()
        await asyncio.gather(*(claimer(f"bench-{n}") for n in range(args.claimers)))
        seconds = time.perf_counter() - began
        cpu_after = server_cpu_seconds(root) if root else None
        wal = await pool.fetchval("SELECT pg_current_wal_lsn() - $1::pg_lsn", lsn)
        counts = await pool.fetchrow(Q["bench_counts"])
    finally:
        await pool.close()
    # Each run's claim and terminal write update job_run; the lease table's claim does not.
    hot = await _hot_updates(dsn, args.runs * (1 if shape == "lease-table" else 2))
    if not done == counts["succeeded"] == counts["attempts"] == counts["attempted_runs"] \
            == args.runs:
        raise SystemExit(f"{shape}: {done} claimed of {args.runs}, counts {dict(counts)}")
    return {"shape": shape, "prepare": args.prepare, "runs": done,
            "fillfactor": fillfactor,
            "claimers": args.claimers, "batch": args.batch,
            "runs_per_second": round(done / seconds),
            "postgres_cpu_us_per_run": per_run_us(cpu_before, cpu_after, done),
            "wal_bytes_per_run": round(float(wal) / done),
            "hot_update_share": hot,
            "deadlocks": getattr(shaped, "deadlocks", 0)}


async def _hot_updates(dsn: str, updates: int) -> float | None:
    """The share of job_run's updates that were heap-only. A backend reports its counts when
    it goes idle or exits, so they are read until ``updates`` are in, for at most five
    seconds."""
    conn = await asyncpg.connect(dsn)
    try:
        for _ in range(50):
            row = await conn.fetchrow(Q["bench_hot_updates"])
            if row["updates"] >= updates:
                break
            await asyncio.sleep(0.1)
            await conn.execute("SELECT pg_stat_clear_snapshot()")
    finally:
        await conn.close()
    return round(row["hot"] / row["updates"], 3) if row["updates"] else None


def _parent(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None  # not a local server
    return int(stat.rpartition(")")[2].split()[1])


async def bench(admin_dsn: str, args: argparse.Namespace) -> None:
    for _ in range(args.rounds):
        for shape in args.shapes:
            print(json.dumps(await one_round(admin_dsn, shape, args)), flush=True)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    run_on_database(args.dsn, lambda dsn: bench(dsn, args))


if __name__ == "__main__":
    main()
