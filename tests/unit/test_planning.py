"""The planner's pure decision: misfire policies, bounds, caps and DST pass-through."""

from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from cronwire.domain import planning
from cronwire.domain.cron import next_occurrences, occurrences_between
from cronwire.domain.model import (
    DueSchedule,
    MisfirePolicy,
    PlanDecision,
    PlannedRun,
    RunStatus,
    ScheduleAdvance,
)
from cronwire.domain.planning import (
    MAX_RUNS_PER_PASS,
    MAX_SKIPPED_ROWS,
    MISFIRE_TOLERANCE,
    RECORD_HORIZON,
    decide,
    plan_schedule,
    writable_span,
)

# Postgres now() has microseconds; cron instants are whole seconds.
NOW = datetime(2027, 1, 10, 12, 0, 0, 500_000, tzinfo=UTC)
LOOKAHEAD = 5.0
# Every instant has a partition (the partition-bounded cases pass their own span).
EVERYWHERE = (datetime.min.replace(tzinfo=UTC), datetime.max.replace(tzinfo=UTC))
MINUTE = timedelta(minutes=1)
# Partitions from December 2026 (or January 2027) to March 2027, as a keeper leaves them.
DECEMBER_ON = (datetime(2026, 12, 1, tzinfo=UTC), datetime(2027, 3, 1, tzinfo=UTC))
JANUARY_ON = (datetime(2027, 1, 1, tzinfo=UTC), datetime(2027, 3, 1, tzinfo=UTC))


def schedule(cron: str = "* * * * *", **changes: object) -> DueSchedule:
    base = DueSchedule(
        id=uuid.uuid4(),
        tenant_id=uuid.uuid4(),
        cron=cron,
        timezone="UTC",
        misfire_policy=MisfirePolicy.FIRE_ALL,
        catchup_window_seconds=3600,
        next_fire_at=NOW,
        last_fire_at=None,
        starts_at=None,
        ends_at=None,
    )
    return replace(base, **changes)  # type: ignore[arg-type]


def plan(
    s: DueSchedule, now: datetime = NOW, lookahead: float = LOOKAHEAD
) -> tuple[list[PlannedRun], ScheduleAdvance]:
    return plan_schedule(s, now, now + timedelta(seconds=lookahead))


def times(runs: list[PlannedRun], status: RunStatus) -> list[datetime]:
    return [r.scheduled_for for r in runs if r.status is status]


def at(hour: int, minute: int, second: int = 0) -> datetime:
    return datetime(2027, 1, 10, hour, minute, second, tzinfo=UTC)


def every_minute(first: datetime, last: datetime) -> list[datetime]:
    count = int((last - first) / MINUTE) + 1
    return [first + i * MINUTE for i in range(count)]


def test_on_time_schedule_fires_within_lookahead_and_advances() -> None:
    s = schedule("*/2 * * * * *", next_fire_at=at(12, 0))
    runs, advance = plan(s)
    assert times(runs, RunStatus.PENDING) == [at(12, 0), at(12, 0, 2), at(12, 0, 4)]
    assert times(runs, RunStatus.SKIPPED) == []
    assert advance == ScheduleAdvance(s.id, at(12, 0, 6), at(12, 0, 4), planned=3)


def test_nothing_due_in_window_still_moves_cursor_to_next_occurrence() -> None:
    # A cursor that is not itself an occurrence (operator edit) is a lower bound only.
    s = schedule("0 * * * *", next_fire_at=NOW + timedelta(seconds=1), last_fire_at=at(11, 0))
    runs, advance = plan(s)
    assert runs == []
    assert advance == ScheduleAdvance(s.id, at(13, 0), at(11, 0))


def test_lateness_within_tolerance_is_not_a_misfire() -> None:
    s = schedule(
        "* * * * * *", misfire_policy=MisfirePolicy.SKIP,
        next_fire_at=NOW - MISFIRE_TOLERANCE + timedelta(seconds=1),
    )
    runs, _ = plan(s)
    expected = occurrences_between(
        s.cron, "UTC", s.next_fire_at - timedelta(microseconds=1), NOW + timedelta(seconds=5), 500
    )
    assert times(runs, RunStatus.PENDING) == expected
    assert len(expected) == 64 and times(runs, RunStatus.SKIPPED) == []  # 11:59:02..12:00:05


def test_fire_all_after_two_hour_outage_keeps_the_catchup_window() -> None:
    s = schedule(next_fire_at=NOW - timedelta(hours=2), catchup_window_seconds=3600)
    runs, advance = plan(s)
    assert times(runs, RunStatus.SKIPPED) == every_minute(at(10, 1), at(11, 0))
    assert times(runs, RunStatus.PENDING) == every_minute(at(11, 1), at(12, 0))
    assert advance == ScheduleAdvance(s.id, at(12, 1), at(12, 0), planned=60)


def test_fire_all_with_zero_window_fires_only_on_time_occurrences() -> None:
    s = schedule(next_fire_at=NOW - timedelta(hours=2), catchup_window_seconds=0)
    runs, _ = plan(s)
    assert times(runs, RunStatus.SKIPPED) == every_minute(at(10, 1), at(11, 59))
    assert times(runs, RunStatus.PENDING) == [at(12, 0)]


def test_fire_once_fires_only_the_latest_missed_occurrence() -> None:
    s = schedule(misfire_policy=MisfirePolicy.FIRE_ONCE, next_fire_at=NOW - timedelta(hours=2))
    runs, advance = plan(s)
    # 11:59 is the latest missed one; 12:00 is within the tolerance, so on time.
    assert times(runs, RunStatus.PENDING) == [at(11, 59), at(12, 0)]
    assert times(runs, RunStatus.SKIPPED) == every_minute(at(10, 1), at(11, 58))
    assert advance.next_fire_at == at(12, 1)


def test_fire_once_on_a_sparse_schedule_finds_the_latest_miss_days_back() -> None:
    s = schedule("0 3 * * 1", misfire_policy=MisfirePolicy.FIRE_ONCE,
                 next_fire_at=NOW - timedelta(days=7))  # 2027-01-10 is a Sunday
    runs, advance = plan(s)
    assert times(runs, RunStatus.PENDING) == [datetime(2027, 1, 4, 3, tzinfo=UTC)]
    assert times(runs, RunStatus.SKIPPED) == []
    assert advance.next_fire_at == datetime(2027, 1, 11, 3, tzinfo=UTC)


def test_fire_once_after_years_paused_still_finds_the_latest_miss() -> None:
    s = schedule("0 3 * * 1", misfire_policy=MisfirePolicy.FIRE_ONCE,
                 next_fire_at=datetime(2001, 1, 1, tzinfo=UTC))
    runs, advance = plan(s)
    # Only the last seven days are written: one catch-up run, no skipped rows before it.
    assert [(r.scheduled_for, r.status) for r in runs] == [
        (datetime(2027, 1, 4, 3, tzinfo=UTC), RunStatus.PENDING)]
    assert advance.next_fire_at == datetime(2027, 1, 11, 3, tzinfo=UTC)


def test_fire_once_fires_its_latest_miss_even_older_than_the_record_horizon() -> None:
    s = schedule("0 0 1 1 *", misfire_policy=MisfirePolicy.FIRE_ONCE,
                 next_fire_at=datetime(2026, 12, 1, tzinfo=UTC))
    runs, advance = plan(s)  # 2027-01-01 was nine days before NOW
    assert [(r.scheduled_for, r.status) for r in runs] == [
        (datetime(2027, 1, 1, tzinfo=UTC), RunStatus.PENDING)]
    assert advance.next_fire_at == datetime(2028, 1, 1, tzinfo=UTC)


def test_fire_once_on_a_monthly_schedule_after_a_three_week_outage_fires_once() -> None:
    s = schedule("0 6 15 * *", misfire_policy=MisfirePolicy.FIRE_ONCE,
                 next_fire_at=datetime(2026, 12, 15, 6, tzinfo=UTC))
    runs, advance = plan_schedule(s, NOW, NOW + timedelta(seconds=LOOKAHEAD), DECEMBER_ON)
    assert [(r.scheduled_for, r.status) for r in runs] == [
        (datetime(2026, 12, 15, 6, tzinfo=UTC), RunStatus.PENDING)]
    assert advance.next_fire_at == datetime(2027, 1, 15, 6, tzinfo=UTC)


def test_fire_once_leaves_no_row_for_a_miss_older_than_every_partition() -> None:
    s = schedule("0 0 31 12 *", misfire_policy=MisfirePolicy.FIRE_ONCE,
                 next_fire_at=datetime(2026, 12, 1, tzinfo=UTC))
    runs, advance = plan_schedule(s, NOW, NOW + timedelta(seconds=LOOKAHEAD), JANUARY_ON)
    assert runs == [] and advance.next_fire_at == datetime(2027, 12, 31, tzinfo=UTC)


def test_skip_records_every_missed_occurrence_as_skipped() -> None:
    s = schedule(misfire_policy=MisfirePolicy.SKIP, next_fire_at=NOW - timedelta(hours=2))
    runs, advance = plan(s)
    assert times(runs, RunStatus.SKIPPED) == every_minute(at(10, 1), at(11, 59))
    assert times(runs, RunStatus.PENDING) == [at(12, 0)]
    assert advance == ScheduleAdvance(s.id, at(12, 1), at(12, 0), planned=1)


@pytest.mark.parametrize("policy", list(MisfirePolicy))
def test_skipped_rows_are_capped_at_the_most_recent(policy: MisfirePolicy) -> None:
    s = schedule("* * * * * *", misfire_policy=policy, catchup_window_seconds=600,
                 next_fire_at=NOW - timedelta(hours=2))
    runs, _ = plan(s)
    skipped = times(runs, RunStatus.SKIPPED)
    pending = times(runs, RunStatus.PENDING)
    assert len(skipped) == MAX_SKIPPED_ROWS
    assert skipped == sorted(set(skipped))
    # The cap drops the oldest: the last skipped run is right before the first pending one.
    assert pending[0] - skipped[-1] == timedelta(seconds=1)


def test_pending_runs_are_bounded_per_pass_and_later_passes_finish_the_catchup() -> None:
    s = schedule("* * * * * *", catchup_window_seconds=7200, next_fire_at=NOW - timedelta(hours=1))
    seen: list[datetime] = []
    now = NOW
    for _ in range(10):
        runs, advance = plan(s, now)
        assert len(runs) <= MAX_RUNS_PER_PASS
        assert all(r.status is RunStatus.PENDING for r in runs)
        seen += [r.scheduled_for for r in runs]
        assert advance.next_fire_at is not None
        s = replace(s, next_fire_at=advance.next_fire_at, last_fire_at=advance.last_fire_at)
        if advance.next_fire_at > now + timedelta(seconds=LOOKAHEAD):
            break
        now += timedelta(milliseconds=300)  # each tick happens a little later
    expected = occurrences_between(
        "* * * * * *", "UTC", NOW - timedelta(hours=1, microseconds=1),
        now + timedelta(seconds=LOOKAHEAD), 10_000,
    )
    assert seen == expected and len(seen) > 3 * MAX_RUNS_PER_PASS


def test_nothing_is_written_older_than_the_record_horizon() -> None:
    s = schedule("0 * * * *", catchup_window_seconds=60 * 86400,
                 next_fire_at=NOW - timedelta(days=30))
    runs, advance = plan(s)
    floor = NOW - RECORD_HORIZON
    assert runs and min(r.scheduled_for for r in runs) >= floor
    assert len(runs) == 7 * 24  # every hour of the last seven days, all within the window
    assert advance.next_fire_at == at(13, 0)


def test_starts_at_holds_back_earlier_occurrences() -> None:
    s = schedule("*/2 * * * * *", next_fire_at=at(12, 0), starts_at=at(12, 0, 3))
    runs, advance = plan(s)
    assert times(runs, RunStatus.PENDING) == [at(12, 0, 4)]
    assert advance.next_fire_at == at(12, 0, 6)


def test_starts_at_beyond_the_horizon_moves_the_cursor_there() -> None:
    s = schedule("0 * * * *", next_fire_at=at(11, 0), starts_at=at(15, 30))
    runs, advance = plan(s)
    assert runs == [] and advance.next_fire_at == at(16, 0)


def test_ends_at_is_inclusive_and_ends_the_schedule() -> None:
    s = schedule("* * * * * *", next_fire_at=at(12, 0), ends_at=at(12, 0, 3))
    runs, advance = plan(s)
    assert times(runs, RunStatus.PENDING) == [at(12, 0, i) for i in range(4)]
    assert advance == ScheduleAdvance(s.id, None, at(12, 0, 3), planned=4)


def test_ends_at_inside_an_outage_bounds_the_skipped_runs_too() -> None:
    s = schedule(misfire_policy=MisfirePolicy.SKIP, next_fire_at=NOW - timedelta(hours=2),
                 ends_at=at(10, 30))
    runs, advance = plan(s)
    assert times(runs, RunStatus.SKIPPED) == every_minute(at(10, 1), at(10, 30))
    assert times(runs, RunStatus.PENDING) == []
    assert advance.next_fire_at is None


def test_ends_at_inside_the_window_ends_fire_once_catchup() -> None:
    s = schedule(misfire_policy=MisfirePolicy.FIRE_ONCE, next_fire_at=NOW - timedelta(hours=2),
                 ends_at=at(11, 0))
    runs, advance = plan(s)
    assert times(runs, RunStatus.PENDING) == [at(11, 0)]
    assert times(runs, RunStatus.SKIPPED) == every_minute(at(10, 1), at(10, 59))
    assert advance.next_fire_at is None


def test_an_unparseable_cron_parks_the_schedule_instead_of_blocking_the_batch() -> None:
    s = schedule("61 * * * *", last_fire_at=at(11, 0))
    runs, advance = plan(s)
    assert runs == [] and advance == ScheduleAdvance(s.id, None, at(11, 0))


def test_run_ids_are_deterministic_so_replanning_collides() -> None:
    s = schedule("*/10 * * * * *", next_fire_at=at(12, 0))
    first, advance = plan(s)
    # An operator moves the cursor back: the re-planned occurrences get the same ids.
    again, _ = plan(replace(s, next_fire_at=at(11, 59, 50)))
    assert {r.id for r in first} <= {r.id for r in again}
    assert len({r.id for r in again}) == len(again)
    assert advance.next_fire_at == at(12, 0, 10)


def test_decide_plans_every_schedule_and_keeps_order() -> None:
    batch = [schedule("*/5 * * * * *", next_fire_at=at(12, 0)) for _ in range(20)]
    decision = decide(batch, NOW, EVERYWHERE, LOOKAHEAD)
    assert [a.schedule_id for a in decision.advances] == [s.id for s in batch]
    assert len(decision.runs) == 2 * 20  # 12:00:00 and 12:00:05 each


def test_schedules_sharing_a_timetable_keep_their_own_identity_and_history() -> None:
    # Same cron, cursor and bounds: one timetable serves all; ids and last fires stay own.
    firing = [schedule("*/5 * * * * *", next_fire_at=at(12, 0), last_fire_at=at(11, h))
              for h in range(3)]
    waiting = [schedule("0 * * * *", next_fire_at=at(12, 0), starts_at=at(15, 30),
                        last_fire_at=at(9, h)) for h in range(3)]
    decision = decide(firing + waiting, NOW, EVERYWHERE, LOOKAHEAD)
    assert len({r.id for r in decision.runs}) == len(decision.runs) == 2 * 3
    assert {r.schedule_id for r in decision.runs} == {s.id for s in firing}
    assert [a.last_fire_at for a in decision.advances] == [at(12, 0, 5)] * 3 + [
        at(9, h) for h in range(3)]
    assert [a.next_fire_at for a in decision.advances] == [at(12, 0, 10)] * 3 + [at(16, 0)] * 3


def test_decide_stops_at_its_row_budget_but_always_makes_progress(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(planning, "MAX_ROWS_PER_DECISION", 150)
    batch = [
        schedule("* * * * * *", next_fire_at=NOW - timedelta(seconds=59)) for _ in range(5)
    ]
    decision = decide(batch, NOW, EVERYWHERE, LOOKAHEAD)
    # 64 runs each: the budget is crossed by the third schedule; the rest wait a tick.
    assert [a.schedule_id for a in decision.advances] == [s.id for s in batch[:3]]
    assert len(decision.runs) == 3 * 64
    monkeypatch.setattr(planning, "MAX_ROWS_PER_DECISION", 1)
    assert len(decide(batch, NOW, EVERYWHERE, LOOKAHEAD).advances) == 1


def test_spring_forward_wall_clock_time_fires_once_at_the_end_of_the_gap() -> None:
    # Europe/Berlin skips 02:00-03:00 local on 2027-03-28: 02:30 fires at 03:00 CEST.
    gap_end = datetime(2027, 3, 28, 1, 0, tzinfo=UTC)
    s = schedule("30 2 * * *", timezone="Europe/Berlin", next_fire_at=gap_end)
    runs, advance = plan(s, gap_end)
    assert times(runs, RunStatus.PENDING) == [gap_end]
    assert advance.next_fire_at == datetime(2027, 3, 29, 0, 30, tzinfo=UTC)


@pytest.mark.parametrize(
    ("cron", "fires"),
    [
        # Interval schedule: real time, the repeated hour fires again.
        ("*/30 * * * *", ["00:00", "00:30", "01:00", "01:30", "02:00"]),
        # Wall-clock schedule: 02:30 local exists twice, fires once (first occurrence).
        ("30 2 * * *", ["00:30"]),
    ],
)
def test_fall_back_follows_the_cron_maths(cron: str, fires: list[str]) -> None:
    start = datetime(2027, 10, 31, 0, 0, tzinfo=UTC)  # 02:00 CEST, the fold begins
    s = schedule(cron, timezone="Europe/Berlin", next_fire_at=start)
    runs, _ = plan(s, start, lookahead=7200)
    got = [r.scheduled_for.strftime("%H:%M") for r in runs]
    assert got == fires
    expected = next_occurrences(cron, "Europe/Berlin", start - timedelta(microseconds=1), 10)
    horizon = start + timedelta(hours=2)
    assert [r.scheduled_for for r in runs] == [t for t in expected if t <= horizon]


def test_runs_before_the_oldest_partition_leave_no_row_and_the_rest_is_planned() -> None:
    s = schedule(catchup_window_seconds=7200, next_fire_at=NOW - timedelta(minutes=90))
    since = at(11, 30)  # the oldest partition starts half an hour ago
    runs, advance = plan_schedule(s, NOW, NOW + timedelta(seconds=LOOKAHEAD),
                                  (since, NOW + timedelta(days=30)))
    assert min(r.scheduled_for for r in runs) == since
    assert times(runs, RunStatus.PENDING) == every_minute(since, at(12, 0))
    assert advance.next_fire_at == at(12, 1)


def test_lookahead_past_the_newest_partition_stops_the_cursor_at_its_end() -> None:
    s = schedule(next_fire_at=at(11, 59))
    end = at(12, 0, 30)  # no partition from 12:00:30 on
    runs, advance = plan_schedule(s, NOW, NOW + timedelta(hours=1), (at(0, 0), end))
    assert times(runs, RunStatus.PENDING) == [at(11, 59), at(12, 0)]
    assert advance.next_fire_at == at(12, 1)  # due again; planned once its month exists
    again, same = plan_schedule(replace(s, next_fire_at=at(12, 1)), NOW,
                                NOW + timedelta(hours=1), (at(0, 0), end))
    assert again == [] and same.next_fire_at == at(12, 1)


def test_no_partition_around_now_plans_nothing_and_moves_no_cursor() -> None:
    assert decide([schedule()], NOW, None, LOOKAHEAD) == PlanDecision([], [])


def test_writable_span_merges_adjacent_partitions_around_an_instant() -> None:
    months = [datetime(2027, m, 1, tzinfo=UTC) for m in range(1, 7)]
    bounds = [(months[4], months[5]), (months[0], months[1]), (months[1], months[2]),
              (months[3], months[4])]  # March is missing
    assert writable_span(bounds, at(12, 0)) == (months[0], months[2])
    assert writable_span(bounds, datetime(2027, 4, 2, tzinfo=UTC)) == (months[3], months[5])
    assert writable_span(bounds, datetime(2027, 3, 2, tzinfo=UTC)) is None
    assert writable_span([], NOW) is None


@pytest.mark.parametrize("policy", list(MisfirePolicy))
@pytest.mark.parametrize("paused_minutes", [0, 5, 90, 60 * 24 * 8])
def test_due_on_resume_counts_what_the_planner_then_writes_due_by_now(
    policy: MisfirePolicy, paused_minutes: int,
) -> None:
    # Resumed at NOW after a pause of `paused_minutes`: the count the console and the CLI
    # warn with is the runs the planner's next pass writes due by now (not skipped).
    s = schedule(misfire_policy=policy, next_fire_at=NOW.replace(microsecond=0)
                 - timedelta(minutes=paused_minutes))
    runs, _ = plan(s, lookahead=0.0)
    written = [r for r in runs if r.status is not RunStatus.SKIPPED and r.scheduled_for <= NOW]
    assert planning.due_on_resume(s, NOW, 10_000) == len(written)


def test_due_on_resume_stops_at_max_runs_and_at_its_limit() -> None:
    s = schedule(next_fire_at=NOW.replace(microsecond=0) - timedelta(minutes=50))  # 51 minutes
    assert planning.due_on_resume(s, NOW, 10_000) == 51
    assert planning.due_on_resume(replace(s, max_runs=10, runs_planned=4), NOW, 10_000) == 6
    assert planning.due_on_resume(s, NOW, 20) == 20
