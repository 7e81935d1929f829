"""PostgresRunStore against real Postgres: lease rule 3 on every write, batching, clamps."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from uuid import UUID

import asyncpg
import pytest

from cronwire.adapters.postgres.claim_source import PostgresClaimSource
from cronwire.adapters.postgres.maintenance_store import PostgresMaintenanceStore
from cronwire.adapters.postgres.run_store import PostgresRunStore
from cronwire.adapters.postgres.schedule_store import PostgresScheduleStore
from cronwire.domain.errors import StorageError
from cronwire.domain.model import (
    AttemptRecord,
    ClaimBatch,
    ClaimedRun,
    RunResolution,
    RunStatus,
)
from tests.support.runs import SeededSchedule, seed_due_runs, seed_schedule, seed_tenant

URL = "http://127.0.0.1:9/hook"
RETRY8 = {"max_attempts": 8, "initial_backoff_seconds": 1, "max_backoff_seconds": 1}


async def _seed(pool: asyncpg.Pool, count: int, retry: dict[str, float] | None = None) -> SeededSchedule:
    async with pool.acquire() as conn:
        schedule = await seed_schedule(conn, await seed_tenant(conn), URL, retry=retry)
        await seed_due_runs(conn, schedule, count)
    return schedule


def _resolution(
    run: ClaimedRun, status: RunStatus, *, delay: float | None = None, excerpt: str | None = "ok"
) -> RunResolution:
    now = datetime.now(UTC)
    attempt = AttemptRecord(
        run_id=run.id, scheduled_for=run.scheduled_for, tenant_id=run.tenant_id,
        attempt=run.attempt, started_at=now, finished_at=now + timedelta(milliseconds=5),
        outcome="success" if status is RunStatus.SUCCEEDED else "http_error",
        status_code=200 if status is RunStatus.SUCCEEDED else 503, error=None,
        duration_ms=5, response_excerpt=excerpt,
    )
    return RunResolution(
        run_id=run.id, scheduled_for=run.scheduled_for, status=status,
        attempt_count=run.attempt, retry_delay_seconds=delay,
        last_status_code=attempt.status_code, last_error=None, attempt=attempt,
        lease_generation=run.lease_generation,
    )


async def _row(pool: asyncpg.Pool, run_id: UUID) -> asyncpg.Record:
    row = await pool.fetchrow(
        """SELECT status, claimed_by, attempt_count, claim_expires_at, first_attempt_at,
                  finished_at, last_status_code, extract(epoch FROM fire_after - now()) AS due_in
             FROM job_run WHERE id = $1""",
        run_id,
    )
    assert row is not None
    return row


async def _expire_and_reclaim(pool: asyncpg.Pool, run: ClaimedRun, by: str) -> ClaimedRun:
    await pool.execute(
        "UPDATE job_run SET claim_expires_at = now() - interval '1 ms' WHERE id = $1", run.id
    )
    [again] = await PostgresClaimSource(pool).claim(by, 1, 30)
    assert again.id == run.id
    return again


async def test_resolve_writes_many_runs_and_their_evidence_in_one_call(db_pool: asyncpg.Pool) -> None:
    await _seed(db_pool, 3)
    runs = await PostgresClaimSource(db_pool).claim("a", 3, 30)
    store = PostgresRunStore(db_pool)
    statuses = [RunStatus.SUCCEEDED, RunStatus.RETRYING, RunStatus.FAILED]
    landed = await store.resolve(
        "a", [_resolution(r, s, delay=30.0 if s is RunStatus.RETRYING else None)
              for r, s in zip(runs, statuses, strict=True)],
    )
    assert landed == {r.id: s for r, s in zip(runs, statuses, strict=True)}
    rows = {r.id: await _row(db_pool, r.id) for r in runs}
    done, retrying, failed = (rows[r.id] for r in runs)
    assert done["status"] == "succeeded" and done["finished_at"] is not None
    assert retrying["status"] == "retrying" and retrying["finished_at"] is None
    assert 29 < retrying["due_in"] <= 30  # now() + delay, on the database clock
    assert failed["status"] == "failed" and failed["last_status_code"] == 503
    assert all(r["claim_expires_at"] is None for r in rows.values())
    evidence = await db_pool.fetch("SELECT run_id, attempt, claimed_by FROM job_run_attempt")
    assert {(e["run_id"], e["attempt"], e["claimed_by"]) for e in evidence} == {
        (r.id, 1, "a") for r in runs
    }


async def test_no_write_of_a_non_owner_changes_anything(db_pool: asyncpg.Pool) -> None:
    await _seed(db_pool, 1)
    [run] = await PostgresClaimSource(db_pool).claim("a", 1, 30)
    store = PostgresRunStore(db_pool)
    raw = "SELECT xmin::text AS version, * FROM job_run WHERE id = $1"  # xmin: any write shows
    before = await db_pool.fetchrow(raw, run.id)
    key = [(run.id, run.scheduled_for, run.lease_generation)]
    assert await store.resolve("b", [_resolution(run, RunStatus.SUCCEEDED)]) == {}
    assert await store.renew_leases("b", key, 300) == set()
    assert await store.fail_minimal(
        "b", run.id, run.scheduled_for, "nope", run.lease_generation) is False
    assert await store.release("b", key) == 0
    assert await store.defer("b", key, datetime.now(UTC) + timedelta(hours=1)) == 0
    assert await db_pool.fetchrow(raw, run.id) == before
    assert await db_pool.fetchval("SELECT count(*) FROM job_run_attempt") == 0


async def test_release_after_another_replica_reclaimed_touches_nothing(db_pool: asyncpg.Pool) -> None:
    """A draining replica must not give back the attempt of a run someone else holds."""
    await _seed(db_pool, 1)
    [mine] = await PostgresClaimSource(db_pool).claim("a", 1, 30)
    theirs = await _expire_and_reclaim(db_pool, mine, "b")
    store = PostgresRunStore(db_pool)
    assert await store.release("a", [(mine.id, mine.scheduled_for, mine.lease_generation)]) == 0
    assert await store.resolve("a", [_resolution(mine, RunStatus.SUCCEEDED)]) == {}
    row = await _row(db_pool, mine.id)
    # Its request never started (no renewal recorded it), so the attempt is not used up.
    assert (row["status"], row["claimed_by"], row["attempt_count"]) == ("running", "b", 1)
    assert await store.resolve("b", [_resolution(theirs, RunStatus.SUCCEEDED)]) == {
        mine.id: RunStatus.SUCCEEDED}


async def test_a_late_result_of_an_earlier_attempt_never_lands_on_a_later_claim(
    db_pool: asyncpg.Pool,
) -> None:
    """Same owner, two leases on one run (its first expired): the write is pinned to the
    attempt its lease was taken for."""
    await _seed(db_pool, 1)
    [first] = await PostgresClaimSource(db_pool).claim("a", 1, 30)
    second = await _expire_and_reclaim(db_pool, first, "a")
    store = PostgresRunStore(db_pool)
    assert await store.resolve("a", [_resolution(first, RunStatus.FAILED)]) == {}
    assert await store.resolve("a", [_resolution(second, RunStatus.SUCCEEDED)]) == {
        first.id: RunStatus.SUCCEEDED}


async def test_release_gives_the_attempt_back(db_pool: asyncpg.Pool) -> None:
    await _seed(db_pool, 1)
    [run] = await PostgresClaimSource(db_pool).claim("a", 1, 30)
    key = [(run.id, run.scheduled_for, run.lease_generation)]
    assert await PostgresRunStore(db_pool).release("a", key) == 1
    row = await _row(db_pool, run.id)
    assert (row["status"], row["attempt_count"], row["first_attempt_at"]) == ("pending", 0, None)
    [again] = await PostgresClaimSource(db_pool).claim("b", 1, 30)
    assert again.attempt == 1


async def test_defer_postpones_without_consuming_an_attempt(db_pool: asyncpg.Pool) -> None:
    await _seed(db_pool, 1)
    [run] = await PostgresClaimSource(db_pool).claim("a", 1, 30)
    until = await db_pool.fetchval("SELECT now() + interval '1 hour'")
    key = [(run.id, run.scheduled_for, run.lease_generation)]
    assert await PostgresRunStore(db_pool).defer("a", key, until) == 1
    row = await _row(db_pool, run.id)
    assert (row["status"], row["attempt_count"]) == ("pending", 0)
    assert 3590 < row["due_in"] <= 3600
    assert await PostgresClaimSource(db_pool).claim("b", 1, 30) == []


async def test_renew_extends_only_our_leases(db_pool: asyncpg.Pool) -> None:
    await _seed(db_pool, 2)
    a_run, b_run = await PostgresClaimSource(db_pool).claim("a", 2, 5)
    await db_pool.execute("UPDATE job_run SET claimed_by = 'b' WHERE id = $1", b_run.id)
    kept = await PostgresRunStore(db_pool).renew_leases(
        "a", [(a_run.id, a_run.scheduled_for, a_run.lease_generation),
              (b_run.id, b_run.scheduled_for, b_run.lease_generation)], 600
    )
    assert kept == {a_run.id}
    left = await db_pool.fetchval(
        "SELECT extract(epoch FROM claim_expires_at - now()) FROM job_run WHERE id = $1",
        a_run.id,
    )
    assert 590 < left <= 600


async def test_a_failed_batch_raises_and_fail_minimal_ends_the_run(db_pool: asyncpg.Pool) -> None:
    await _seed(db_pool, 2)
    good, bad = await PostgresClaimSource(db_pool).claim("a", 2, 30)
    store = PostgresRunStore(db_pool)
    poison = _resolution(bad, RunStatus.SUCCEEDED, excerpt="x" * 2000)  # violates the 1 KiB check
    with pytest.raises(StorageError):
        await store.resolve("a", [_resolution(good, RunStatus.SUCCEEDED), poison])
    assert (await _row(db_pool, good.id))["status"] == "running"  # all or nothing
    assert await store.fail_minimal(
        "a", bad.id, bad.scheduled_for, "ResolveFailed: x", bad.lease_generation) is True
    row = await db_pool.fetchrow("SELECT status, last_error, finished_at FROM job_run WHERE id = $1",
                                 bad.id)
    assert row["status"] == "failed" and row["last_error"] == "ResolveFailed: x"
    assert row["finished_at"] is not None


async def test_attempt_numbers_are_clamped_to_eight(db_pool: asyncpg.Pool) -> None:
    await _seed(db_pool, 1, retry=RETRY8)
    await db_pool.execute("UPDATE job_run SET status = 'retrying', attempt_count = 8")
    [run] = await PostgresClaimSource(db_pool).claim("a", 1, 30)
    assert run.attempt == 8
    assert await PostgresRunStore(db_pool).resolve("a", [_resolution(run, RunStatus.FAILED)])
    assert await db_pool.fetchval("SELECT max(attempt) FROM job_run_attempt") == 8


async def test_due_backlog_counts_due_and_in_flight_runs(db_pool: asyncpg.Pool) -> None:
    schedule = await _seed(db_pool, 4)
    await seed_due_runs(db_pool, schedule, 5, first=1000, due_seconds_ago=-600)  # not due yet
    await PostgresClaimSource(db_pool).claim("a", 1, 30)
    assert await PostgresMaintenanceStore(db_pool).due_backlog() == 4  # the gauge's source


async def test_two_processes_sharing_an_instance_id_cannot_write_on_each_others_lease(
    db_pool: asyncpg.Pool,
) -> None:
    """Lease identity: 'twin' claimed the run, stalled past its lease, and its twin (same
    instance id: a copied config, pid 1 in every container) re-claimed it. The stalled
    one's renew, release, defer, resolve and minimal write all name the old generation
    and change nothing; the live lease's writes land."""
    await _seed(db_pool, 1)
    [stalled] = await PostgresClaimSource(db_pool).claim("twin", 1, 30)
    live = await _expire_and_reclaim(db_pool, stalled, "twin")
    assert live.lease_generation == stalled.lease_generation + 1
    store = PostgresRunStore(db_pool)
    raw = "SELECT xmin::text AS version, * FROM job_run WHERE id = $1"
    before = await db_pool.fetchrow(raw, live.id)
    old = [(stalled.id, stalled.scheduled_for, stalled.lease_generation)]
    assert await store.renew_leases("twin", old, 300, {stalled.id}) == set()
    assert await store.release("twin", old) == 0
    assert await store.defer("twin", old, datetime.now(UTC) + timedelta(hours=1)) == 0
    assert await store.resolve("twin", [_resolution(stalled, RunStatus.FAILED)]) == {}
    assert await store.fail_minimal(
        "twin", stalled.id, stalled.scheduled_for, "stale", stalled.lease_generation) is False
    assert await db_pool.fetchrow(raw, live.id) == before
    current = [(live.id, live.scheduled_for, live.lease_generation)]
    assert await store.renew_leases("twin", current, 300) == {live.id}
    assert await store.release("twin", current) == 1


async def test_our_own_landed_write_is_found_after_its_reply_was_lost(db_pool: asyncpg.Pool) -> None:
    await _seed(db_pool, 2)
    done, other = await PostgresClaimSource(db_pool).claim("a", 2, 30)
    store = PostgresRunStore(db_pool)
    assert await store.resolve("a", [_resolution(done, RunStatus.SUCCEEDED)])
    keys = [(r.id, r.scheduled_for, r.lease_generation) for r in (done, other)]
    assert await store.ended_by_lease("a", keys) == {done.id: RunStatus.SUCCEEDED}
    assert await store.ended_by_lease("b", keys) == {}


async def test_a_run_running_when_its_schedule_is_deleted_is_cancelled_not_given_back(
    db_pool: asyncpg.Pool,
) -> None:
    """After a delete, a release (shutdown), a retry or a re-claim of the expired lease of
    a run that was running ends it cancelled: no further attempt can start."""
    schedule = await _seed(db_pool, 3, retry=RETRY8)
    released, retried, expired = await PostgresClaimSource(db_pool).claim("a", 3, 30)
    cancelled = await PostgresScheduleStore(db_pool).delete(schedule.tenant_id, schedule.id)
    assert cancelled == 3  # all three were running: marked, left to finish their request
    store = PostgresRunStore(db_pool)
    key = [(released.id, released.scheduled_for, released.lease_generation)]
    assert await store.release("a", key) == 1
    assert await store.resolve("a", [_resolution(retried, RunStatus.RETRYING, delay=0.0)]) == {
        retried.id: RunStatus.CANCELLED}
    await db_pool.execute(
        "UPDATE job_run SET claim_expires_at = now() - interval '1 ms' WHERE id = $1", expired.id)
    batch = await PostgresClaimSource(db_pool).claim("b", 10, 30)
    assert batch == [] and isinstance(batch, ClaimBatch) and batch.ended == (RunStatus.CANCELLED,)
    rows = await db_pool.fetch("SELECT status, finished_at FROM job_run")
    assert {r["status"] for r in rows} == {"cancelled"}
    assert all(r["finished_at"] is not None for r in rows)
    assert await db_pool.fetchval("SELECT count(*) FROM job_run_attempt") == 1  # retried's
