"""The overlap gate, pause-after-failures and the claim's other new verdicts, against the
Postgres claim (the gate CTEs of job_run.sql) and the in-memory fake alike: the same
seeded runs must come out the same way from both (ADR 0033)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest

from cronwire.domain.attempts import aborted_as_superseded
from cronwire.domain.model import ClaimBatch, RunStatus
from cronwire.harness.seeding import SeededSchedule
from tests.support.resolutions import resolution
from tests.support.worlds import STORES, World, world_for

RETRY1 = {"max_attempts": 1, "initial_backoff_seconds": 1, "max_backoff_seconds": 1}


@pytest.fixture(params=STORES)
def world(request: pytest.FixtureRequest) -> World:
    return world_for(request)


async def gated(world: World, policy: str | None, count: int, *,
                pause_after_failures: int | None = None,
                retry: dict[str, float] | None = None) -> SeededSchedule:
    """A schedule with ``count`` due runs (1 ms apart, oldest first), under ``policy``."""
    schedule = await world.seed(count, retry=retry)
    await world.gate(schedule.id, policy, pause_after_failures)
    return schedule


async def more(world: World, schedule: SeededSchedule, first: int, policy: str) -> None:
    """One more due run of ``schedule``, a later occurrence, under the same policy."""
    await world.seed(1, first=first, schedule=schedule)
    await world.gate(schedule.id, policy)


async def ordered(world: World) -> list[uuid.UUID]:
    """Every run id, oldest occurrence first."""
    return [run_id for run_id, _ in await world.keys()]


async def status_of(world: World, ids: list[uuid.UUID]) -> list[str]:
    return [(await world.row(run_id)).status for run_id in ids]


async def test_allow_is_never_gated(world: World) -> None:
    schedule = await gated(world, None, 3)
    runs = (await world.claims.claim("a", 10, 30)).runs
    assert len(runs) == 3
    assert (await world.schedule_facts(schedule.id)).overlap_run is None


async def test_skip_starts_the_oldest_and_skips_the_rest_and_what_comes_while_it_runs(
    world: World,
) -> None:
    schedule = await gated(world, "skip", 3)
    ids = await ordered(world)
    [run] = (await world.claims.claim("a", 10, 30)).runs
    assert run.id == ids[0]
    assert await status_of(world, ids) == ["running", "skipped", "skipped"]
    assert [await world.skip_reason(i) for i in ids] == [None, "overlap", "overlap"]
    skipped = await world.row(ids[1])
    assert skipped.finished_at is not None and skipped.first_attempt_at is None
    assert "overlap_policy skip" in (skipped.last_error or "")
    assert (await world.schedule_facts(schedule.id)).overlap_run == ids[0]
    # A later occurrence while the first still runs: skipped too, and counted as ended.
    await more(world, schedule, 10, "skip")
    batch = await world.claims.claim("a", 10, 30)
    assert batch.runs == () and isinstance(batch, ClaimBatch)
    assert batch.ended == (RunStatus.SKIPPED,)
    # Once the first has ended, the next occurrence starts.
    assert await world.runs.resolve("a", [resolution(run, RunStatus.SUCCEEDED)])
    await more(world, schedule, 20, "skip")
    [started] = (await world.claims.claim("a", 10, 30)).runs
    assert (await world.schedule_facts(schedule.id)).overlap_run == started.id


async def test_buffer_one_lets_one_wait_skips_more_and_wakes_it_when_the_first_ends(
    world: World,
) -> None:
    await gated(world, "buffer_one", 3)
    ids = await ordered(world)
    [first] = (await world.claims.claim("a", 10, 30)).runs
    assert first.id == ids[0]
    assert await status_of(world, ids) == ["running", "pending", "skipped"]
    waiting = await world.row(ids[1])
    assert 4 < waiting.due_in <= 5.5  # rests 5 s (one run ahead of it: the occupant)
    assert list((await world.claims.claim("a", 10, 30)).runs) == []  # not due yet: nothing
    await world.runs.resolve("a", [resolution(first, RunStatus.SUCCEEDED)])
    assert (await world.row(ids[1])).due_in <= 0.001  # woken by the end of the first
    [second] = (await world.claims.claim("a", 10, 30)).runs
    assert second.id == ids[1]


async def test_buffer_one_counts_a_woken_run_not_yet_started_as_the_next_to_run(
    world: World,
) -> None:
    """Between the occupant's end and the claim of the run it woke (in Kafka mode: the
    republish), later occurrences arrive on their own (claimed by key). The woken run is
    the next to start, so one of them may wait behind it and the rest are skipped, or
    buffer_one would hold two waiting once the woken run starts."""
    schedule = await gated(world, "buffer_one", 2)
    ids = await ordered(world)
    [first] = (await world.claims.claim("a", 10, 30)).runs
    await world.runs.resolve("a", [resolution(first, RunStatus.SUCCEEDED)])
    assert await status_of(world, ids) == ["succeeded", "pending"]  # ids[1] woken
    for first_ms in (10, 20):  # two later occurrences, each claimed alone by its key
        await more(world, schedule, first_ms, "buffer_one")
        later = (await world.keys())[-1]
        assert (await world.keyed.claim_keys("k", [later], 30)).runs == ()
    ids = await ordered(world)
    assert await status_of(world, ids) == ["succeeded", "pending", "pending", "skipped"]
    [woken] = (await world.keyed.claim_keys("k", [(ids[1], (await world.keys())[1][1])], 30)).runs
    assert woken.id == ids[1]


async def test_buffer_all_keeps_one_hundred_waiting_in_order_and_skips_beyond(
    world: World,
) -> None:
    await gated(world, "buffer_all", 103)
    ids = await ordered(world)
    runs = (await world.claims.claim("a", 200, 30)).runs
    assert [r.id for r in runs] == [ids[0]]
    statuses = await status_of(world, ids)
    assert statuses == ["running"] + ["pending"] * 100 + ["skipped"] * 2
    # Nothing jumps the queue: after the first ends, the second (oldest) starts.
    await world.runs.resolve("a", [resolution(runs[0], RunStatus.FAILED)])
    [second] = (await world.claims.claim("a", 200, 30)).runs
    assert second.id == ids[1]


async def test_cancel_other_starts_the_newest_and_cancels_older_ones(world: World) -> None:
    schedule = await gated(world, "cancel_other", 3)
    ids = await ordered(world)
    [run] = (await world.claims.claim("a", 10, 30)).runs
    assert run.id == ids[2]
    assert await status_of(world, ids) == ["cancelled", "cancelled", "running"]
    assert "superseded" in ((await world.row(ids[0])).last_error or "")
    # A newer occurrence arrives while it runs: it starts, and the running one is found
    # superseded by its holder, which aborts its request and writes it cancelled.
    await more(world, schedule, 10, "cancel_other")
    [newer] = (await world.claims.claim("b", 10, 30)).runs
    assert newer.id not in ids and newer.cancel_other and run.cancel_other
    leases = [(run.id, run.scheduled_for, run.lease_generation)]
    assert await world.runs.superseded("a", leases) == {run.id}
    assert await world.runs.superseded("b", leases) == set()  # not b's lease
    newer_lease = [(newer.id, newer.scheduled_for, newer.lease_generation)]
    assert await world.runs.superseded("b", newer_lease) == set()  # the gate's holder
    now = datetime.now(UTC)
    landed = await world.runs.resolve("a", [aborted_as_superseded(run, now, now)])
    assert landed == {run.id: RunStatus.CANCELLED}
    row = await world.row(run.id)
    assert row.status == "cancelled" and "aborted" in (row.last_error or "")
    assert (run.id, 1, "a") in await world.attempts()


async def test_a_superseded_runs_complete_answer_is_recorded_as_it_came(world: World) -> None:
    # Its 200 arrived before its holder learned of the newer occurrence: it was delivered.
    schedule = await gated(world, "cancel_other", 1)
    [run] = (await world.claims.claim("a", 10, 30)).runs
    await more(world, schedule, 10, "cancel_other")
    [newer] = (await world.claims.claim("b", 10, 30)).runs
    assert newer.id != run.id
    landed = await world.runs.resolve("a", [resolution(run, RunStatus.SUCCEEDED)])
    assert landed == {run.id: RunStatus.SUCCEEDED}
    assert (await world.row(run.id)).last_status_code == 200


async def test_a_superseded_runs_failed_attempt_is_not_retried(world: World) -> None:
    schedule = await gated(world, "cancel_other", 1)
    [run] = (await world.claims.claim("a", 10, 30)).runs
    await more(world, schedule, 10, "cancel_other")
    [newer] = (await world.claims.claim("b", 10, 30)).runs
    assert newer.id != run.id
    landed = await world.runs.resolve("a", [resolution(run, RunStatus.RETRYING, delay=1)])
    assert landed == {run.id: RunStatus.CANCELLED}
    assert "not retried" in ((await world.row(run.id)).last_error or "")


async def test_cancel_other_ends_a_retrying_predecessor_at_once(world: World) -> None:
    schedule = await gated(world, "cancel_other", 1)
    [run] = (await world.claims.claim("a", 10, 30)).runs
    await world.runs.resolve("a", [resolution(run, RunStatus.RETRYING, delay=3600)])
    await more(world, schedule, 10, "cancel_other")
    [newer] = (await world.claims.claim("a", 10, 30)).runs
    assert newer.id != run.id
    assert (await world.row(run.id)).status == "cancelled"


async def test_a_run_the_gate_skips_is_skipped_by_the_claim_of_keys_too(world: World) -> None:
    await gated(world, "skip", 2)
    ids = await ordered(world)
    batch = await world.keyed.claim_keys("k", await world.keys(), 30)
    assert [r.id for r in batch.runs] == [ids[0]]
    assert await status_of(world, ids) == ["running", "skipped"]


async def test_pause_after_failures_pauses_at_the_threshold_with_a_reason(world: World) -> None:
    schedule = await gated(world, None, 3, pause_after_failures=2, retry=RETRY1)
    runs = sorted((await world.claims.claim("a", 10, 30)).runs, key=lambda r: r.scheduled_for)
    # One success then one failure: the count is 1, no pause.
    await world.runs.resolve("a", [resolution(runs[0], RunStatus.SUCCEEDED),
                                   resolution(runs[1], RunStatus.FAILED, error="HTTPStatus: 503")])
    facts = await world.schedule_facts(schedule.id)
    assert (facts.status, facts.consecutive_failures) == ("active", 1)
    await world.runs.resolve("a", [resolution(runs[2], RunStatus.FAILED,
                                              error="HTTPStatus: 500 Boom")])
    facts = await world.schedule_facts(schedule.id)
    assert (facts.status, facts.consecutive_failures) == ("paused", 2)
    assert facts.paused_reason is not None
    assert "2 consecutive failed runs" in facts.paused_reason
    assert "HTTPStatus: 500 Boom" in facts.paused_reason and "resume" in facts.paused_reason


async def test_a_success_resets_the_failure_count(world: World) -> None:
    schedule = await gated(world, None, 2, pause_after_failures=5, retry=RETRY1)
    runs = sorted((await world.claims.claim("a", 10, 30)).runs, key=lambda r: r.scheduled_for)
    await world.runs.resolve("a", [resolution(runs[0], RunStatus.FAILED)])
    assert (await world.schedule_facts(schedule.id)).consecutive_failures == 1
    await world.runs.resolve("a", [resolution(runs[1], RunStatus.SUCCEEDED)])
    assert (await world.schedule_facts(schedule.id)).consecutive_failures == 0


async def test_a_release_of_a_superseded_run_cancels_it(world: World) -> None:
    schedule = await gated(world, "cancel_other", 1)
    [run] = (await world.claims.claim("a", 10, 30)).runs
    await more(world, schedule, 10, "cancel_other")
    [newer] = (await world.claims.claim("b", 10, 30)).runs
    assert newer.id != run.id
    assert await world.runs.release("a", [(run.id, run.scheduled_for, run.lease_generation)])
    assert (await world.row(run.id)).status == "cancelled"


async def test_the_gate_is_decided_by_the_claim_not_by_the_clock(world: World) -> None:
    """An expired lease of the occupant is leased again: the occupant carries on."""
    schedule = await gated(world, "skip", 1)
    [run] = (await world.claims.claim("a", 10, 30)).runs
    await world.expire(run.id)
    [again] = (await world.claims.claim("b", 10, 30)).runs
    assert again.id == run.id and again.attempt == 1
    assert (await world.schedule_facts(schedule.id)).overlap_run == run.id
