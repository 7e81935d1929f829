"""A resume's count and the planner's pass agree: the missed occurrences are judged at the
resume's instant (planning.judged_at, ADR 0003's amendment of 2026-12-06)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from cronwire.domain import planning
from cronwire.domain.model import MisfirePolicy, RunStatus
from tests.unit.test_planning import at, every_minute, plan, schedule, times


@pytest.mark.parametrize("policy", list(MisfirePolicy))
@pytest.mark.parametrize("paused_minutes", [5, 90, 60 * 24 * 8])
@pytest.mark.parametrize("pass_after", [timedelta(seconds=1.5), timedelta(seconds=59)])
def test_the_planner_writes_what_the_resume_counted_across_a_minute_boundary(
    policy: MisfirePolicy, paused_minutes: int, pass_after: timedelta,
) -> None:
    # Resumed at 12:00:59.5, counted then; the planner's pass comes after 12:01:00. Judged
    # at the pass's own instant, fire_all's window [pass - 600 s, ...] had lost 11:51 (the
    # CI failure of 2026-12-06: 9 runs listed against runs_due 10). Judged at the resume,
    # it writes exactly the counted runs, plus the 12:01 occurrence, on time either way.
    resumed = at(12, 0, 59) + timedelta(microseconds=500_000)
    s = schedule(misfire_policy=policy, catchup_window_seconds=600,
                 next_fire_at=at(12, 0) - timedelta(minutes=paused_minutes), resumed_at=resumed)
    counted = planning.due_on_resume(s, resumed, 10_000)
    runs, _ = plan(s, now=resumed + pass_after, lookahead=0.0)
    written = [r.scheduled_for for r in runs
               if r.status is not RunStatus.SKIPPED and r.scheduled_for <= resumed]
    assert len(written) == counted
    assert times(runs, RunStatus.PENDING)[len(written):] == [at(12, 1)]
    if policy is MisfirePolicy.FIRE_ALL and paused_minutes > 10:
        assert written == every_minute(at(11, 51), at(12, 0))


def test_a_pass_long_after_a_resume_judges_at_its_own_instant() -> None:
    # A planner away for longer than the misfire tolerance after the resume: its pass
    # applies the policy at its own instant, as for any planner that was away.
    resumed = at(12, 0, 30)
    s = schedule(catchup_window_seconds=600, next_fire_at=at(11, 0), resumed_at=resumed)
    runs, _ = plan(s, now=at(12, 5, 30), lookahead=0.0)
    assert times(runs, RunStatus.PENDING) == every_minute(at(11, 56), at(12, 5))
