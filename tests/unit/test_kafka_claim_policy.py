"""Kafka mode's claim decisions (domain/kafka_claims.py), one behaviour at a time: the
state, a clock reading and the observations in; the step and the new state out."""

from __future__ import annotations

from dataclasses import replace

import pytest

from cronwire.domain.backlog import BACKLOG_GRACE_SECONDS
from cronwire.domain.kafka_claims import (
    OVERFLOW_AFTER_SECONDS,
    OVERFLOW_REPORT_SECONDS,
    STALE_KEYS_SECONDS,
    BacklogBoth,
    BesideKeys,
    ClaimKeys,
    ClaimState,
    Degraded,
    Idle,
    KafkaClaimPolicy,
    ReadPeer,
    Reclaim,
    ReportOverflow,
    Sweep,
)

GRACE = 5.0
SWEEP = 1.0
POLICY = KafkaClaimPolicy(grace_seconds=GRACE, sweep_seconds=SWEEP)


def _opening(*, limit: int = 10, healthy: bool = True, backlogged: bool = False,
             keys_busy: bool = False) -> object:
    return POLICY.opening(limit=limit, healthy=healthy, backlogged=backlogged,
                          keys_busy=keys_busy)


def _behind(state: ClaimState, now: float, *, limit: int = 10) -> tuple[
        ClaimState, ReportOverflow | None]:
    """A claim of keys that took every key it was let, leased them all, and left more."""
    return POLICY.keys_claimed(state, now, limit=limit, taken=limit, leased=limit, held=0,
                               keys_left=True)


# -- what the observations decide alone -------------------------------------------------

def test_a_claim_let_take_nothing_does_nothing() -> None:
    assert _opening(limit=0) == Idle()
    assert _opening(limit=0, healthy=False, backlogged=True) == Idle()


def test_an_unhealthy_broker_hands_every_claim_to_the_polling_claim() -> None:
    assert _opening(healthy=False) == Degraded()
    assert _opening(healthy=False, backlogged=True, keys_busy=True) == Degraded()


def test_a_backlogged_partition_claims_fairly_and_by_half_the_limit_of_keys_at_once() -> None:
    assert _opening(limit=10, backlogged=True) == BacklogBoth(key_limit=5,
                                                              grace=BACKLOG_GRACE_SECONDS)
    assert _opening(limit=7, backlogged=True) == BacklogBoth(key_limit=3)
    assert _opening(limit=1, backlogged=True) == BacklogBoth(key_limit=1)  # never no keys


def test_while_the_other_claim_takes_keys_a_backlogged_claim_only_claims_fairly() -> None:
    assert _opening(backlogged=True, keys_busy=True) == BesideKeys(BACKLOG_GRACE_SECONDS)


def test_a_healthy_broker_without_a_backlog_leaves_the_step_to_the_state() -> None:
    assert _opening() is None
    assert _opening(keys_busy=True) is None  # keys busy matters only while backlogged


# -- claim by keys otherwise --------------------------------------------------------------

def test_between_sweeps_a_claim_takes_keys_and_changes_nothing() -> None:
    state = POLICY.start(100.0)
    assert state.next_sweep == 100.0 + SWEEP
    assert POLICY.next_step(state, 100.5) == (state, ClaimKeys())
    assert POLICY.seconds_until_claim(state, 100.5) == pytest.approx(0.5)
    assert POLICY.seconds_until_claim(state, 200.0) == 0.0


def test_while_reclaiming_empty_reclaims_back_off_as_the_polling_claim_does() -> None:
    """The reclaim stands in for the sweep, which stays due: waiting for it meant waiting
    for nothing, and the loop claimed every 10 ms (its floor) for the whole grace. Now
    10 ms doubling per empty reclaim in a row, from the start again when one finds runs
    (a slot of the key freed elsewhere sends no key, so the first retries stay quick)."""
    state, _ = POLICY.next_step(POLICY.start(0.0), 1.0)
    state, _ = POLICY.peer_read(state, False)
    state = POLICY.swept(state, 1.0, limit=10, found=2, flow_keys=True)  # reclaim until 6.0
    assert POLICY.next_step(state, 3.0)[1] == Reclaim()
    assert POLICY.seconds_until_claim(state, 3.0) == 0.0
    waits = []
    for _ in range(5):
        state = POLICY.reclaimed(state, 3.0, found=False)
        waits.append(POLICY.seconds_until_claim(state, 3.0))
    assert waits == pytest.approx([0.01, 0.02, 0.04, 0.04, 0.04])  # RECLAIM_WAIT_CAP_SECONDS
    state = POLICY.reclaimed(state, 3.0, found=True)
    assert POLICY.seconds_until_claim(state, 3.0) == 0.0
    state = POLICY.reclaimed(state, 3.0, found=False)
    assert POLICY.seconds_until_claim(state, 3.0) == pytest.approx(0.01)
    assert POLICY.seconds_until_claim(state, 8.0 + 1) == 0.0  # reclaim over: the sweep is due


# -- the sweep: its interval, a full sweep, the peers' overflow ----------------------------

def test_the_sweep_is_due_once_an_interval_and_reads_the_peers_first() -> None:
    state = POLICY.start(0.0)
    state, step = POLICY.next_step(state, 1.0)
    assert step == ReadPeer()
    assert state.next_sweep == 1.0 + SWEEP
    state, sweep = POLICY.peer_read(state, False)
    assert sweep == Sweep(GRACE)
    state = POLICY.swept(state, 1.0, limit=10, found=3, flow_keys=False)
    assert POLICY.next_step(state, 1.5)[1] == ClaimKeys()  # not due again within the interval
    assert POLICY.next_step(state, 2.0)[1] == ReadPeer()


def test_a_full_sweep_sweeps_again_at_the_next_claim() -> None:
    state, _ = POLICY.next_step(POLICY.start(0.0), 1.0)
    state, _ = POLICY.peer_read(state, False)
    state = POLICY.swept(state, 1.0, limit=10, found=10, flow_keys=False)
    assert state.next_sweep == 1.0
    state, step = POLICY.next_step(state, 1.01)
    assert step == Sweep(GRACE)  # the peers were read this interval: not again


def test_while_a_peer_overflows_the_sweep_takes_runs_a_backlog_grace_overdue() -> None:
    state, _ = POLICY.next_step(POLICY.start(0.0), 1.0)
    state, sweep = POLICY.peer_read(state, True)
    assert sweep == Sweep(BACKLOG_GRACE_SECONDS)
    assert state.peer_overflow
    # A grace already shorter than the backlog's stays as it is.
    short = KafkaClaimPolicy(grace_seconds=0.5, sweep_seconds=SWEEP)
    assert short.peer_read(short.start(0.0), True)[1] == Sweep(0.5)


def test_the_peers_are_read_at_most_once_an_interval_and_their_reading_is_kept() -> None:
    slow = KafkaClaimPolicy(grace_seconds=GRACE, sweep_seconds=0.25)
    state, step = slow.next_step(slow.start(0.0), 0.25)
    assert step == ReadPeer()
    # The interval is the longer of the sweep's and the overflow's.
    assert state.next_peer_read == 0.25 + max(0.25, OVERFLOW_AFTER_SECONDS)
    state, _ = slow.peer_read(state, True)
    state, step = slow.next_step(state, 0.5)  # a sweep is due, the peers' read is not
    assert step == Sweep(BACKLOG_GRACE_SECONDS)  # the last reading holds
    state, step = slow.next_step(state, 1.25)
    assert step == ReadPeer()
    state, sweep = slow.peer_read(state, False)
    assert sweep == Sweep(GRACE)
    assert slow.next_step(state, 1.5)[1] == Sweep(GRACE)


# -- reclaiming held runs -------------------------------------------------------------------

def test_a_claim_of_keys_that_left_runs_held_reclaims_them_for_the_grace() -> None:
    state = POLICY.start(0.0)
    state, _ = POLICY.keys_claimed(state, 0.2, limit=10, taken=4, leased=2, held=2,
                                   keys_left=False)
    assert state.reclaim_until == 0.2 + GRACE
    assert POLICY.next_step(state, 3.0) == (state, Reclaim(BACKLOG_GRACE_SECONDS))
    # Reclaiming comes before a due sweep.
    assert POLICY.next_step(state, 5.1)[1] == Reclaim()
    assert POLICY.next_step(state, 5.2)[1] == ReadPeer()


def test_reclaiming_goes_on_while_the_fair_claim_finds_runs_and_stops_after() -> None:
    state = replace(POLICY.start(0.0), reclaim_until=5.0)
    state = POLICY.reclaimed(state, 4.0, found=True)
    assert state.reclaim_until == 4.0 + GRACE
    assert POLICY.reclaimed(state, 8.0, found=False).reclaim_until == state.reclaim_until
    assert POLICY.next_step(state, 9.0)[1] != Reclaim()


def test_a_sweep_that_found_runs_of_flow_control_keys_starts_reclaiming() -> None:
    state, _ = POLICY.next_step(POLICY.start(0.0), 1.0)
    state, _ = POLICY.peer_read(state, False)
    state = POLICY.swept(state, 1.0, limit=10, found=2, flow_keys=True)
    assert state.reclaim_until == 1.0 + GRACE
    assert POLICY.next_step(state, 2.0)[1] == Reclaim()
    plain = POLICY.swept(state, 7.0, limit=10, found=2, flow_keys=False)
    assert plain.reclaim_until == state.reclaim_until  # runs without keys change nothing


# -- this replica's overflow report -----------------------------------------------------

def test_behind_for_the_overflow_time_reports_and_then_at_most_once_a_period() -> None:
    state = POLICY.start(0.0)
    state, report = _behind(state, 10.0)
    assert report is None and state.behind_since == 10.0
    state, report = _behind(state, 10.0 + OVERFLOW_AFTER_SECONDS / 2)
    assert report is None and state.behind_since == 10.0  # since the first, not reset
    state, report = _behind(state, 10.0 + OVERFLOW_AFTER_SECONDS)
    assert report == ReportOverflow(OVERFLOW_REPORT_SECONDS)
    assert state.next_report == 10.0 + 2 * OVERFLOW_AFTER_SECONDS
    state, report = _behind(state, 10.5 + OVERFLOW_AFTER_SECONDS)
    assert report is None  # paced
    state, report = _behind(state, 10.0 + 2 * OVERFLOW_AFTER_SECONDS)
    assert report == ReportOverflow()


@pytest.mark.parametrize(("taken", "leased", "keys_left"), [
    (9, 9, True),     # took fewer keys than it was let: its slots are not the limit
    (10, 10, False),  # nothing left buffered: caught up
    (10, 4, True),    # most keys found nothing to lease: republished keys, not an overflow
])
def test_a_claim_that_is_not_behind_starts_the_overflow_time_again(
        taken: int, leased: int, keys_left: bool) -> None:
    state, _ = _behind(POLICY.start(0.0), 10.0)
    state, report = POLICY.keys_claimed(state, 10.0 + 2 * OVERFLOW_AFTER_SECONDS, limit=10,
                                        taken=taken, leased=leased, held=0,
                                        keys_left=keys_left)
    assert report is None and state.behind_since is None
    state, report = _behind(state, 13.0)
    assert report is None and state.behind_since == 13.0


def _stale(state: ClaimState, now: float, *, limit: int = 1) -> tuple[
        ClaimState, ReportOverflow | None]:
    """A claim of keys that took every key it was let and left more, but whose keys found
    their runs gone (claimed by the helpers' sweeps)."""
    return POLICY.keys_claimed(state, now, limit=limit, taken=limit, leased=0, held=0,
                               keys_left=True)


def test_while_helped_stale_keys_between_leasing_claims_keep_the_report_going() -> None:
    """The helpers' sweeps take the owner's oldest runs, the ones its next keys name; the
    owner's claims then alternate stale keys and runnable ones. Were each stale claim to
    end "behind", the report would lapse and the helpers go back to the full grace (the
    kafka fleet test saw a quarter of the runs five seconds late so)."""
    state, report = _behind(POLICY.start(0.0), 10.0, limit=1)
    for now in (10.2, 10.4, 10.6, 10.8):
        state, report = _stale(state, now)
        assert report is None and state.behind_since == 10.0
        state, report = _behind(state, now + 0.1, limit=1)
    assert report is None
    state, report = _stale(state, 10.0 + OVERFLOW_AFTER_SECONDS)
    assert report == ReportOverflow() and state.behind_since == 10.0


def test_stale_keys_alone_neither_start_nor_long_keep_an_overflow() -> None:
    """Keys republished for runs claimed long ago (after a broker restart, a rebalance)
    are worked through in a few claims; they are not an overflow."""
    state, report = _stale(POLICY.start(0.0), 10.0)
    assert report is None and state.behind_since is None
    state, _ = _behind(state, 20.0)
    state, report = _stale(state, 20.0 + STALE_KEYS_SECONDS)
    assert state.behind_since == 20.0  # as long as a leasing claim was that recent
    state, report = _stale(state, 20.1 + STALE_KEYS_SECONDS)
    assert report is None and state.behind_since is None
    state, report = _stale(state, 20.2 + STALE_KEYS_SECONDS)
    assert report is None and state.behind_since is None


def test_half_the_keys_leased_is_still_behind() -> None:
    state, _ = _behind(POLICY.start(0.0), 10.0)
    _, report = POLICY.keys_claimed(state, 10.0 + OVERFLOW_AFTER_SECONDS, limit=10, taken=10,
                                    leased=5, held=0, keys_left=True)
    assert report == ReportOverflow()


def test_the_state_is_a_value_the_policy_never_changes_in_place() -> None:
    state = POLICY.start(0.0)
    before = replace(state)
    POLICY.next_step(state, 10.0)
    POLICY.keys_claimed(state, 10.0, limit=1, taken=1, leased=1, held=1, keys_left=True)
    POLICY.swept(state, 10.0, limit=1, found=1, flow_keys=True)
    assert state == before
