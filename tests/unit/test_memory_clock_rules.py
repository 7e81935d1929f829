"""What only the in-memory fake has: its clock. Leases expire and retries come due as
that clock moves, with no sleeping (the same rules as on Postgres, on Postgres's now())."""

from __future__ import annotations

from cronwire.adapters.memory import (
    MemoryClaimSource,
    MemoryClock,
    MemoryDatabase,
    MemoryRunStore,
)
from cronwire.domain.model import RunResolution, RunStatus

URL = "http://127.0.0.1:9/hook"


def _db(count: int) -> MemoryDatabase:
    db = MemoryDatabase(clock=MemoryClock(frozen=True))
    db.add_due_runs(db.add_schedule(db.add_tenant(), URL).id, count)
    return db


async def test_a_lease_expires_when_the_clock_passes_it() -> None:
    db = _db(1)
    claims = MemoryClaimSource(db)
    [first] = (await claims.claim("a", 1, 30)).runs
    db.clock.advance(29.9)
    assert (await claims.claim("b", 1, 30)).runs == ()
    db.clock.advance(0.2)
    [again] = (await claims.claim("b", 1, 30)).runs
    assert (again.id, again.lease_generation) == (first.id, first.lease_generation + 1)


async def test_a_retry_comes_due_when_the_clock_reaches_it() -> None:
    db = _db(1)
    claims = MemoryClaimSource(db)
    [run] = (await claims.claim("a", 1, 30)).runs
    landed = await MemoryRunStore(db).resolve("a", [RunResolution(
        run_id=run.id, scheduled_for=run.scheduled_for, status=RunStatus.RETRYING,
        attempt_count=run.attempt, retry_delay_seconds=10, last_status_code=503,
        last_error=None, attempt=None, lease_generation=run.lease_generation)])
    assert landed == {run.id: RunStatus.RETRYING}
    assert await claims.seconds_until_due() == 10
    assert (await claims.claim("a", 1, 30)).runs == ()
    db.clock.advance(10)
    [retry] = (await claims.claim("a", 1, 30)).runs
    assert retry.attempt == 2


def test_an_occurrence_is_inserted_once() -> None:
    db = _db(0)
    [schedule] = db.schedules.values()
    at = db.now()
    assert db.insert_run(schedule.id, at) is not None
    assert db.insert_run(schedule.id, at) is None  # UNIQUE (schedule_id, scheduled_for)
    assert len(db.runs) == 1
