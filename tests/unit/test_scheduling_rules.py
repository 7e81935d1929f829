"""The pure rules of the scheduling semantics: the overlap gate's verdicts, jitter's
determinism and spread, and the planner's one-time, limited, gated and jittered runs."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from cronwire.domain.jitter import jitter_ms, jittered
from cronwire.domain.model import DueSchedule, MisfirePolicy, OverlapPolicy, RunStatus
from cronwire.domain.overlap import Candidate, Gate, Occupant, gate, new_occupant, wait_seconds
from cronwire.domain.planning import decide, plan_schedule

T0 = datetime(2027, 1, 1, 12, tzinfo=UTC)
SKIP, B1, BALL, CANCEL = (OverlapPolicy.SKIP, OverlapPolicy.BUFFER_ONE,
                          OverlapPolicy.BUFFER_ALL, OverlapPolicy.CANCEL_OTHER)


def cand(n: int, policy: OverlapPolicy, *, waiting: int = 0, running: bool = False) -> Candidate:
    return Candidate(uuid.UUID(int=n), T0 + timedelta(seconds=n), policy, running, waiting)


def held(n: int, *, ended: bool = False) -> Occupant:
    return Occupant(uuid.UUID(int=n), T0 + timedelta(seconds=n), ended)


def verdicts(occupant: Occupant | None, *cands: Candidate) -> list[Gate]:
    decided = gate(occupant, list(cands))
    return [decided[c.run_id] for c in cands]


@pytest.mark.parametrize(("occupant", "cands", "expected"), [
    # skip: the oldest starts, the others are skipped; while one runs, all are skipped.
    (None, [cand(1, SKIP), cand(2, SKIP)], [Gate.LEASE, Gate.SKIP]),
    (held(0), [cand(1, SKIP)], [Gate.SKIP]),
    (held(0, ended=True), [cand(1, SKIP)], [Gate.LEASE]),
    (held(1), [cand(1, SKIP)], [Gate.LEASE]),  # the occupant itself carries on (a retry)
    # buffer_one: one waits, more are skipped; the head starts when the gate is free.
    (held(0), [cand(1, B1, waiting=0)], [Gate.WAIT]),
    (held(0), [cand(2, B1, waiting=1)], [Gate.SKIP]),
    (None, [cand(1, B1), cand(2, B1, waiting=1), cand(3, B1, waiting=2)],
     [Gate.LEASE, Gate.WAIT, Gate.SKIP]),
    (None, [cand(3, B1, waiting=1)], [Gate.WAIT]),  # the head is not due yet: no skip
    # buffer_all: up to 100 wait.
    (held(0), [cand(100, BALL, waiting=99)], [Gate.WAIT]),
    (held(0), [cand(101, BALL, waiting=100)], [Gate.SKIP]),
    (None, [cand(1, BALL), cand(101, BALL, waiting=100)], [Gate.LEASE, Gate.WAIT]),
    (None, [cand(1, BALL), cand(102, BALL, waiting=101)], [Gate.LEASE, Gate.SKIP]),
    # cancel_other: the newest starts, the older ones are superseded, the occupant too.
    (None, [cand(1, CANCEL), cand(2, CANCEL)], [Gate.CANCEL, Gate.LEASE]),
    (held(0), [cand(1, CANCEL)], [Gate.LEASE]),
    (held(5), [cand(1, CANCEL)], [Gate.CANCEL]),  # an older one than the running one
    (held(1), [cand(1, CANCEL, running=True), cand(2, CANCEL)], [Gate.CANCEL, Gate.LEASE]),
])
def test_the_gate(occupant: Occupant | None, cands: list[Candidate],
                  expected: list[Gate]) -> None:
    assert verdicts(occupant, *cands) == expected


def test_at_most_one_run_of_a_schedule_starts_per_claim() -> None:
    for policy in (SKIP, B1, BALL, CANCEL):
        cands = [cand(n, policy, waiting=n) for n in range(6)]
        decided = gate(None, cands)
        assert sum(1 for v in decided.values() if v is Gate.LEASE) == 1, policy
        winner = new_occupant(cands, decided)
        assert winner is not None and decided[winner.run_id] is Gate.LEASE


def test_waiting_runs_rest_longer_the_further_back_they_are_at_most_a_minute() -> None:
    assert [wait_seconds(n) for n in (0, 1, 2, 11, 500)] == [5, 10, 15, 60, 60]


def test_jitter_is_deterministic_within_the_window_and_zero_without() -> None:
    sid = uuid.uuid4()
    assert jitter_ms(sid, T0, 0) == 0
    assert jitter_ms(sid, T0, 60) == jitter_ms(sid, T0, 60)
    assert jittered(sid, T0, 60) - T0 == timedelta(milliseconds=jitter_ms(sid, T0, 60))
    assert all(0 <= jitter_ms(uuid.uuid4(), T0, 1) < 1000 for _ in range(1000))


def test_one_instants_herd_spreads_evenly_over_the_window() -> None:
    """The seed's worst case: 100,000 schedules on one instant, jitter 60 s. The offsets
    fill the minute as a uniform draw would: each second gets about 1/60 of them (a
    chi-square of the 60 counts well inside what chance gives, p > 0.001), none outside."""
    namespace = uuid.UUID("8f2d6a40-0000-4000-8000-000000000000")
    per_second = [0] * 60
    for n in range(100_000):
        per_second[jitter_ms(uuid.uuid5(namespace, str(n)), T0, 60) // 1000] += 1
    mean = 100_000 / 60
    chi_square = sum((count - mean) ** 2 / mean for count in per_second)
    assert sum(per_second) == 100_000
    assert chi_square < 99.6  # 59 degrees of freedom: the 0.999 quantile
    assert max(abs(count - mean) for count in per_second) < 0.1 * mean


def due(**fields: object) -> DueSchedule:
    base: dict[str, object] = dict(
        id=uuid.uuid4(), tenant_id=uuid.uuid4(), cron="* * * * * *", timezone="UTC",
        misfire_policy=MisfirePolicy.FIRE_ALL, catchup_window_seconds=3600, next_fire_at=T0,
        last_fire_at=None, starts_at=None, ends_at=None)
    base.update(fields)
    return DueSchedule(**base)  # type: ignore[arg-type]


def test_a_one_time_schedule_plans_its_instant_and_completes() -> None:
    s = due(cron=None, at=T0)
    runs, advance = plan_schedule(s, T0 - timedelta(seconds=1), T0 + timedelta(seconds=5))
    assert [r.scheduled_for for r in runs] == [T0]
    assert (advance.next_fire_at, advance.completed, advance.planned) == (None, True, 1)
    runs, advance = plan_schedule(s, T0 - timedelta(hours=1), T0 - timedelta(minutes=59))
    assert runs == [] and advance.next_fire_at == T0 and not advance.completed  # not yet


def test_a_long_missed_one_time_schedule_is_a_misfire_and_completes() -> None:
    s = due(cron=None, at=T0, misfire_policy=MisfirePolicy.SKIP)
    now = T0 + timedelta(hours=2)
    runs, advance = plan_schedule(s, now, now + timedelta(seconds=5))
    assert [(r.scheduled_for, r.status) for r in runs] == [(T0, RunStatus.SKIPPED)]
    assert advance.completed and advance.planned == 0


def test_max_runs_caps_the_runs_and_completes_at_the_limit() -> None:
    runs, advance = plan_schedule(due(max_runs=5, runs_planned=3), T0, T0 + timedelta(seconds=9))
    assert len(runs) == 2 and advance.planned == 2 and advance.completed
    assert advance.next_fire_at is None
    runs, advance = plan_schedule(due(max_runs=50, runs_planned=3), T0, T0 + timedelta(seconds=9))
    assert len(runs) == 10 and not advance.completed and advance.next_fire_at is not None


def test_runs_carry_their_overlap_policy_and_jitter_and_allow_costs_nothing() -> None:
    s = due(overlap_policy=SKIP, jitter_seconds=30)
    runs, _ = plan_schedule(s, T0, T0 + timedelta(seconds=2))
    assert {r.overlap_policy for r in runs} == {SKIP}
    assert [r.jitter_ms for r in runs] == [jitter_ms(s.id, r.scheduled_for, 30) for r in runs]
    plain = decide([due()], T0, None, 2.0)  # writable None: nothing planned at all
    assert plain.runs == []
    runs, _ = plan_schedule(due(), T0, T0 + timedelta(seconds=2))
    assert {(r.overlap_policy, r.jitter_ms) for r in runs} == {(None, 0)}
