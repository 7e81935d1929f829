"""Kafka mode's HybridClaimSource over the in-memory stores and hint channel: hinted keys
are claimed and acknowledged, the sweeper catches what no hint delivered, and a broker
that is away hands every claim to the polling source."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import timedelta

from cronwire.adapters.memory import (
    MemoryClaimSource,
    MemoryClock,
    MemoryDatabase,
    MemoryHints,
    MemoryKeyedClaims,
)
from cronwire.adapters.memory.database import MemoryRun
from cronwire.domain.errors import StorageError
from cronwire.domain.model import ClaimBatch, RunStatus
from cronwire.ports import RunKey
from cronwire.service.executor.hybrid_claims import HybridClaimSource

URL = "http://127.0.0.1:9/hook"


def _rig(count: int, *, sweep_seconds: float = 3600) -> tuple[
        MemoryDatabase, MemoryHints, HybridClaimSource]:
    db = MemoryDatabase(clock=MemoryClock(frozen=True))
    db.add_due_runs(db.add_schedule(db.add_tenant(), URL).id, count, due_seconds_ago=1)
    hints = MemoryHints()
    source = HybridClaimSource(hints, MemoryKeyedClaims(db), MemoryClaimSource(db), db.clock,
                               grace_seconds=30, sweep_seconds=sweep_seconds)
    return db, hints, source


async def test_hinted_keys_are_claimed_and_then_acknowledged() -> None:
    db, hints, source = _rig(3)
    keys = [r.key for r in db.runs.values()]
    hints.deliver(keys[:2])
    batch = await source.claim("a", 10, 30)
    assert {r.id for r in batch.runs} == {k[0] for k in keys[:2]}
    assert batch.sources == (("kafka", 2),) and source.name == "kafka"
    assert hints.acknowledged == keys[:2]
    assert (await source.claim("a", 10, 30)).runs == ()  # the third had no hint; not overdue yet


async def test_a_hint_for_a_run_that_is_not_claimable_is_dropped() -> None:
    db, hints, source = _rig(1)
    [run] = db.runs.values()
    run.status = RunStatus.SUCCEEDED
    hints.deliver([run.key])
    assert (await source.claim("a", 10, 30)).runs == ()
    assert hints.acknowledged == [run.key]


async def test_the_sweeper_claims_what_no_hint_delivered_once_the_grace_is_over() -> None:
    db, _, source = _rig(2, sweep_seconds=0)
    assert (await source.claim("a", 10, 30)).runs == ()  # due 1 s ago: within the 30 s grace
    db.clock.advance(30)
    batch = await source.claim("a", 10, 30)
    assert len(batch.runs) == 2 and batch.sources == (("sweeper", 2),)


async def test_while_the_broker_is_away_the_polling_claim_does_the_work() -> None:
    _, hints, source = _rig(2)
    hints.healthy = False
    batch = await source.claim("a", 10, 30)
    assert len(batch.runs) == 2 and batch.sources == (("sweeper", 2),)
    assert source.name == "kafka"  # the source's own label; the batch says what it drew on


def _backlog() -> tuple[MemoryDatabase, MemoryHints, list[MemoryRun], MemoryRun, MemoryRun]:
    """A burst whose keys fill the buffer, a quiet tenant's run due 2 s ago whose key is
    still behind them, and a run due 0.2 s ago (its key is on its way)."""
    db = MemoryDatabase(clock=MemoryClock(frozen=True))
    burst = db.add_due_runs(db.add_schedule(db.add_tenant(), URL).id, 5, due_seconds_ago=10)
    [quiet] = db.add_due_runs(db.add_schedule(db.add_tenant(), URL).id, 1, due_seconds_ago=2)
    [fresh] = db.add_due_runs(db.add_schedule(db.add_tenant(), URL).id, 1, due_seconds_ago=0.2)
    hints = MemoryHints(buffer_limit=2)
    hints.deliver([run.key for run in burst[:2]])  # full: the quiet key is still behind
    return db, hints, burst, quiet, fresh


async def test_a_backlogged_partition_claims_fairly_and_by_key_in_the_same_claim() -> None:
    # The kafka fairness fault at full size: two quiet tenants whose keys shared the
    # burst's partition waited for the whole 50,000-run burst (65 s) behind its keys. And
    # the kafka 100k burst: one claim of each kind in turn left the claim loop waiting for
    # both one after the other; together, it waits for the slower one (ADR 0025).
    db, hints, burst, quiet, fresh = _backlog()
    source = HybridClaimSource(hints, MemoryKeyedClaims(db), MemoryClaimSource(db), db.clock,
                               grace_seconds=30, sweep_seconds=3600)
    batch = await source.claim("a", 4, 30)
    ids = [r.id for r in batch.runs]
    assert len(ids) == len(set(ids)) <= 4  # lease rule 1: never more than the limit
    assert quiet.id in ids  # the fair claim reached the tenant behind the burst's keys
    assert fresh.id not in ids  # due 0.2 s ago: left to its key
    by_source = dict(batch.sources)
    assert by_source["sweeper"] == 2  # the fair half: quiet and the burst's oldest
    assert by_source["kafka"] >= 1 and sum(by_source.values()) == len(ids)
    assert hints.acknowledged == [run.key for run in burst[:2]]  # both keys settled
    assert not hints.backlogged
    assert {burst[0].id, burst[1].id} <= set(ids)


async def test_a_backlogged_claim_whose_claim_by_key_fails_keeps_the_fair_half() -> None:
    class FailingKeys(MemoryKeyedClaims):
        async def claim_keys(self, owner: str, keys: Sequence[RunKey], lease_seconds: float,
                             ) -> ClaimBatch:
            raise StorageError("claim runs by key: connection lost")

    db, hints, burst, quiet, _ = _backlog()
    source = HybridClaimSource(hints, FailingKeys(db), MemoryClaimSource(db), db.clock,
                               grace_seconds=30, sweep_seconds=3600)
    runs = (await source.claim("a", 4, 30)).runs
    assert quiet.id in {r.id for r in runs} and len(runs) == 2  # leased: delivered, not lost
    assert hints.acknowledged == []  # rewound: the keys come again
    assert hints.take(10) == [run.key for run in burst[:2]]


class _KeyAdmitsOne(MemoryKeyedClaims):
    """A claim of keys as a flow-control key admitting one run at a time answers it: the
    first key leased, the others left runnable and reported held; claim_fair counted."""

    fair_claims = 0

    async def claim_keys(self, owner: str, keys: Sequence[RunKey], lease_seconds: float,
                         ) -> ClaimBatch:
        batch = await super().claim_keys(owner, keys[:1], lease_seconds)
        return replace(batch, held=len(keys) - 1)

    async def claim_fair(self, owner: str, limit: int, lease_seconds: float,
                         grace_seconds: float) -> ClaimBatch:
        self.fair_claims += 1
        return await super().claim_fair(owner, 1, lease_seconds, grace_seconds)


def _held_rig(count: int = 4) -> tuple[MemoryDatabase, MemoryHints, _KeyAdmitsOne,
                                       HybridClaimSource, list[MemoryRun]]:
    db = MemoryDatabase(clock=MemoryClock(frozen=True))
    runs = db.add_due_runs(db.add_schedule(db.add_tenant(), URL).id, count, due_seconds_ago=2)
    hints, keyed = MemoryHints(), _KeyAdmitsOne(db)
    source = HybridClaimSource(hints, keyed, MemoryClaimSource(db), db.clock,
                               grace_seconds=30, sweep_seconds=3600)
    return db, hints, keyed, source, runs


async def test_runs_a_claim_of_keys_held_back_are_reclaimed_without_waiting_for_the_sweeper(
) -> None:
    # Their messages are consumed: before, they waited for the sweeper's grace (5 s by
    # default) and then went one sweep a second, a full key draining at the sweeper's pace.
    db, hints, _, source, runs = _held_rig()
    hints.deliver([run.key for run in runs])
    first = await source.claim("a", 10, 30)
    assert [r.id for r in first.runs] == [runs[0].id] and first.held == 3
    assert hints.acknowledged == [run.key for run in runs]  # consumed
    claimed = {runs[0].id}
    for _ in range(3):  # one per claim, as the key admits them; no sweep, no clock advance
        batch = await source.claim("a", 10, 30)
        assert batch.sources[0] == ("sweeper", 1)
        claimed |= {r.id for r in batch.runs}
    assert claimed == {run.id for run in runs}
    # Fresh keys of another tenant are claimed in the same claims, not behind the held runs.
    [fresh] = db.add_due_runs(db.add_schedule(db.add_tenant(), URL).id, 1, due_seconds_ago=0)
    hints.deliver([fresh.key])
    batch = await source.claim("a", 10, 30)
    assert [r.id for r in batch.runs] == [fresh.id] and ("kafka", 1) in batch.sources


async def test_reclaiming_stops_one_grace_after_it_last_found_a_run() -> None:
    db, hints, keyed, source, runs = _held_rig(2)
    hints.deliver([run.key for run in runs])
    await source.claim("a", 10, 30)  # one leased, one held
    assert len((await source.claim("a", 10, 30)).runs) == 1  # the held one, reclaimed
    assert keyed.fair_claims == 1
    db.clock.advance(29)
    await source.claim("a", 10, 30)  # nothing left, but within a grace of the last found
    assert keyed.fair_claims == 2
    db.clock.advance(2)
    await source.claim("a", 10, 30)
    assert keyed.fair_claims == 2  # reclaiming over: the sweeper's work again


async def test_a_full_sweep_is_followed_by_another_at_the_next_claim() -> None:
    """Runs past the grace are more than one claim: the next claim sweeps again instead
    of waiting for the sweep interval (an hour here), so the overflow drains at the
    replica's pace."""
    db, _, source = _rig(0, sweep_seconds=3600)
    db.clock.advance(3600)  # the first sweep is due
    db.add_due_runs(db.add_schedule(db.add_tenant(), URL).id, 5, due_seconds_ago=40)
    taken = [len((await source.claim("a", 2, 300)).runs) for _ in range(4)]
    assert taken == [2, 2, 1, 0]  # the third came back short: the interval applies again


async def test_a_replica_whose_keys_outrun_its_slots_says_so_after_a_second() -> None:
    """Every claim takes all the slots let it (2) and leaves keys: behind. After a second
    of that the replica reports its overflow, for 3 s on the database's clock, and reports
    again at most once a second while it lasts (ADR 0063)."""
    db, hints, source = _rig(12)
    hints.deliver([r.key for r in db.runs.values()])
    await source.claim("a", 2, 300)
    db.clock.advance(0.6)
    await source.claim("a", 2, 300)
    assert db.overflow == {}  # behind for 0.6 s only
    db.clock.advance(0.6)
    await source.claim("a", 2, 300)
    reported = db.now() + timedelta(seconds=3)
    assert db.overflow == {"a": reported}
    db.clock.advance(0.5)
    await source.claim("a", 2, 300)
    assert db.overflow == {"a": reported}  # not again within the second
    db.clock.advance(0.6)
    await source.claim("a", 2, 300)
    assert db.overflow == {"a": db.now() + timedelta(seconds=3)}


async def test_a_replica_whose_slots_take_every_key_is_not_an_overflow() -> None:
    db, hints, source = _rig(12)
    keys = [r.key for r in db.runs.values()]
    for wave in range(3):  # 4 keys a claim, 5 slots: keeping up
        hints.deliver(keys[4 * wave:4 * wave + 4])
        assert len((await source.claim("a", 5, 300)).runs) == 4
        db.clock.advance(0.6)
    assert db.overflow == {}


async def test_keys_of_runs_claimed_long_ago_are_not_an_overflow() -> None:
    """Republished keys (after a broker restart) whose runs are done: every claim is
    limited by the slots and leaves keys, but leases nothing."""
    db, hints, source = _rig(12)
    for run in db.runs.values():
        run.status = RunStatus.SUCCEEDED
    hints.deliver([r.key for r in db.runs.values()])
    for _ in range(4):
        assert (await source.claim("a", 2, 300)).runs == ()
        db.clock.advance(0.6)
    assert db.overflow == {}


async def test_while_a_peer_overflows_sweeps_take_runs_a_second_overdue() -> None:
    """The grace is 30 s here; a peer's report shortens it to BACKLOG_GRACE_SECONDS (1 s)
    while the report holds, from the first read after it. The replica's own report does
    not."""
    db, _, source = _rig(0, sweep_seconds=0)
    db.add_due_runs(db.add_schedule(db.add_tenant(), URL).id, 3, due_seconds_ago=2)
    keyed = MemoryKeyedClaims(db)
    await keyed.report_overflow("b", 3)  # its own
    assert (await source.claim("b", 2, 300)).runs == ()
    await keyed.report_overflow("a", 3)
    # Read once a second at most (full sweeps can follow each other at every claim).
    assert (await source.claim("b", 2, 300)).runs == ()
    db.clock.advance(1)
    swept = await source.claim("b", 2, 300)
    assert len(swept.runs) == 2 and swept.sources == (("sweeper", 2),)
    db.clock.advance(3.1)  # a's report ran out: the third run, 5 s overdue, is left
    assert (await source.claim("b", 2, 300)).runs == ()


async def test_a_failed_read_of_the_peers_overflow_leaves_the_sweep_its_full_grace() -> None:
    class _Unreadable(MemoryKeyedClaims):
        async def peer_overflowing(self, owner: str) -> bool:
            raise StorageError("read overflow: connection lost")

    db = MemoryDatabase(clock=MemoryClock(frozen=True))
    source = HybridClaimSource(MemoryHints(), _Unreadable(db), MemoryClaimSource(db), db.clock,
                               grace_seconds=30, sweep_seconds=0)
    schedule = db.add_schedule(db.add_tenant(), URL).id
    db.add_due_runs(schedule, 1, due_seconds_ago=2)
    [late] = db.add_due_runs(schedule, 1, first=10, due_seconds_ago=40)
    await MemoryKeyedClaims(db).report_overflow("a", 3)
    swept = await source.claim("b", 5, 300)  # the read failed: no peer's overflow, 30 s grace
    assert [run.id for run in swept.runs] == [late.id]
