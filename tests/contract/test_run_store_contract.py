"""The RunStore contract (lease rule 3 on every write, batching, clamps, the cancel of a
deleted schedule), against PostgresRunStore on real Postgres and the in-memory fake."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from cronwire.domain.errors import StorageError
from cronwire.domain.model import (
    ClaimBatch,
    ClaimedRun,
    LeaseKey,
    RunStatus,
)
from tests.support.resolutions import resolution
from tests.support.worlds import STORES, World, world_for

RETRY8 = {"max_attempts": 8, "initial_backoff_seconds": 1, "max_backoff_seconds": 1}


@pytest.fixture(params=STORES)
def world(request: pytest.FixtureRequest) -> World:
    return world_for(request)


def key(run: ClaimedRun) -> list[LeaseKey]:
    return [(run.id, run.scheduled_for, run.lease_generation)]


async def expire_and_reclaim(world: World, run: ClaimedRun, by: str) -> ClaimedRun:
    await world.expire(run.id)
    [again] = (await world.claims.claim(by, 1, 30)).runs
    assert again.id == run.id
    return again


async def test_resolve_writes_many_runs_and_their_evidence_in_one_call(world: World) -> None:
    await world.seed(3)
    runs = (await world.claims.claim("a", 3, 30)).runs
    statuses = [RunStatus.SUCCEEDED, RunStatus.RETRYING, RunStatus.FAILED]
    landed = await world.runs.resolve(
        "a", [resolution(r, s, delay=30.0 if s is RunStatus.RETRYING else None)
              for r, s in zip(runs, statuses, strict=True)],
    )
    assert landed == {r.id: s for r, s in zip(runs, statuses, strict=True)}
    done, retrying, failed = [await world.row(r.id) for r in runs]
    assert done.status == "succeeded" and done.finished_at is not None
    assert retrying.status == "retrying" and retrying.finished_at is None
    assert 29 < retrying.due_in <= 30  # now() + delay, on the store's clock
    assert failed.status == "failed" and failed.last_status_code == 503
    assert all(r.lease_left is None for r in (done, retrying, failed))
    assert await world.attempts() == {(r.id, 1, "a") for r in runs}


async def test_no_write_of_a_non_owner_changes_anything(world: World) -> None:
    await world.seed(1)
    [run] = (await world.claims.claim("a", 1, 30)).runs
    before = await world.version(run.id)
    assert await world.runs.resolve("b", [resolution(run, RunStatus.SUCCEEDED)]) == {}
    assert await world.runs.renew_leases("b", key(run), 300) == set()
    assert await world.runs.fail_minimal(
        "b", run.id, run.scheduled_for, "nope", run.lease_generation) is False
    assert await world.runs.release("b", key(run)) == 0
    assert await world.runs.defer("b", key(run), datetime.now(UTC) + timedelta(hours=1)) == 0
    assert await world.version(run.id) == before
    assert await world.attempts() == set()


async def test_release_after_another_replica_reclaimed_touches_nothing(world: World) -> None:
    """A draining replica must not give back the attempt of a run someone else holds."""
    await world.seed(1)
    [mine] = (await world.claims.claim("a", 1, 30)).runs
    theirs = await expire_and_reclaim(world, mine, "b")
    assert await world.runs.release("a", key(mine)) == 0
    assert await world.runs.resolve("a", [resolution(mine, RunStatus.SUCCEEDED)]) == {}
    row = await world.row(mine.id)
    # Its request never started (no renewal recorded it), so the attempt is not used up.
    assert (row.status, row.claimed_by, row.attempt_count) == ("running", "b", 1)
    assert await world.runs.resolve("b", [resolution(theirs, RunStatus.SUCCEEDED)]) == {
        mine.id: RunStatus.SUCCEEDED}


async def test_a_late_result_of_an_earlier_attempt_never_lands_on_a_later_claim(
    world: World,
) -> None:
    """Same owner, two leases on one run (its first expired): the write is pinned to the
    attempt its lease was taken for."""
    await world.seed(1)
    [first] = (await world.claims.claim("a", 1, 30)).runs
    second = await expire_and_reclaim(world, first, "a")
    assert await world.runs.resolve("a", [resolution(first, RunStatus.FAILED)]) == {}
    assert await world.runs.resolve("a", [resolution(second, RunStatus.SUCCEEDED)]) == {
        first.id: RunStatus.SUCCEEDED}


async def test_release_gives_the_attempt_back(world: World) -> None:
    await world.seed(1)
    [run] = (await world.claims.claim("a", 1, 30)).runs
    assert await world.runs.release("a", key(run)) == 1
    row = await world.row(run.id)
    assert (row.status, row.attempt_count, row.first_attempt_at) == ("pending", 0, None)
    [again] = (await world.claims.claim("b", 1, 30)).runs
    assert again.attempt == 1


async def test_defer_postpones_without_consuming_an_attempt(world: World) -> None:
    await world.seed(1)
    [run] = (await world.claims.claim("a", 1, 30)).runs
    until = await world.db_now() + timedelta(hours=1)
    assert await world.runs.defer("a", key(run), until) == 1
    row = await world.row(run.id)
    assert (row.status, row.attempt_count) == ("pending", 0)
    assert 3590 < row.due_in <= 3600
    assert (await world.claims.claim("b", 1, 30)).runs == ()


async def test_renew_extends_only_our_leases(world: World) -> None:
    await world.seed(2)
    a_run, b_run = (await world.claims.claim("a", 2, 5)).runs
    await world.set_claimed_by(b_run.id, "b")
    kept = await world.runs.renew_leases("a", key(a_run) + key(b_run), 600)
    assert kept == {a_run.id}
    left = (await world.row(a_run.id)).lease_left
    assert left is not None and 590 < left <= 600


async def test_a_failed_batch_raises_and_fail_minimal_ends_the_run(world: World) -> None:
    await world.seed(2)
    good, bad = (await world.claims.claim("a", 2, 30)).runs
    poison = resolution(bad, RunStatus.SUCCEEDED, excerpt="x" * 2000)  # over the 1 KiB check
    with pytest.raises(StorageError):
        await world.runs.resolve("a", [resolution(good, RunStatus.SUCCEEDED), poison])
    assert (await world.row(good.id)).status == "running"  # all or nothing
    assert await world.runs.fail_minimal(
        "a", bad.id, bad.scheduled_for, "ResolveFailed: x", bad.lease_generation) is True
    row = await world.row(bad.id)
    assert row.status == "failed" and row.last_error == "ResolveFailed: x"
    assert row.finished_at is not None


async def test_attempt_numbers_are_clamped_to_eight(world: World) -> None:
    await world.seed(1, retry=RETRY8)
    await world.set_all(status="retrying", attempt_count=8)
    [run] = (await world.claims.claim("a", 1, 30)).runs
    assert run.attempt == 8
    assert await world.runs.resolve("a", [resolution(run, RunStatus.FAILED)])
    assert {attempt for _, attempt, _ in await world.attempts()} == {8}


async def test_two_processes_sharing_an_instance_id_cannot_write_on_each_others_lease(
    world: World,
) -> None:
    """Lease identity: 'twin' claimed the run, stalled past its lease, and its twin (same
    instance id: a copied config, pid 1 in every container) re-claimed it. The stalled
    one's renew, release, defer, resolve and minimal write all name the old generation
    and change nothing; the live lease's writes land."""
    await world.seed(1)
    [stalled] = (await world.claims.claim("twin", 1, 30)).runs
    live = await expire_and_reclaim(world, stalled, "twin")
    assert live.lease_generation == stalled.lease_generation + 1
    before = await world.version(live.id)
    old = key(stalled)
    assert await world.runs.renew_leases("twin", old, 300, {stalled.id}) == set()
    assert await world.runs.release("twin", old) == 0
    assert await world.runs.defer("twin", old, datetime.now(UTC) + timedelta(hours=1)) == 0
    assert await world.runs.resolve("twin", [resolution(stalled, RunStatus.FAILED)]) == {}
    assert await world.runs.fail_minimal(
        "twin", stalled.id, stalled.scheduled_for, "stale", stalled.lease_generation) is False
    assert await world.version(live.id) == before
    assert await world.runs.renew_leases("twin", key(live), 300) == {live.id}
    assert await world.runs.release("twin", key(live)) == 1


async def test_our_own_landed_write_is_found_after_its_reply_was_lost(world: World) -> None:
    await world.seed(2)
    done, other = (await world.claims.claim("a", 2, 30)).runs
    assert await world.runs.resolve("a", [resolution(done, RunStatus.SUCCEEDED)])
    keys = key(done) + key(other)
    assert await world.runs.ended_by_lease("a", keys) == {done.id: RunStatus.SUCCEEDED}
    assert await world.runs.ended_by_lease("b", keys) == {}


async def test_a_run_running_when_its_schedule_is_deleted_is_cancelled_not_given_back(
    world: World,
) -> None:
    """After a delete, a release (shutdown), a retry or a re-claim of the expired lease of
    a run that was running ends it cancelled: no further attempt can start."""
    schedule = await world.seed(3, retry=RETRY8)
    released, retried, expired = (await world.claims.claim("a", 3, 30)).runs
    cancelled = await world.schedules.delete(schedule.tenant_id, schedule.id)
    assert cancelled == 3  # all three were running: marked, left to finish their request
    assert await world.runs.release("a", key(released)) == 1
    assert await world.runs.resolve("a", [resolution(retried, RunStatus.RETRYING, delay=0.0)]) == {
        retried.id: RunStatus.CANCELLED}
    await world.expire(expired.id)
    batch = await world.claims.claim("b", 10, 30)
    assert batch.runs == () and isinstance(batch, ClaimBatch) and batch.ended == (RunStatus.CANCELLED,)
    rows = await world.rows()
    assert {r.status for r in rows} == {"cancelled"}
    assert all(r.finished_at is not None for r in rows)
    assert len(await world.attempts()) == 1  # retried's
