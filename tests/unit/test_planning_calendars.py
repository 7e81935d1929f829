"""The planner's pure decision with calendars (domain/planning.py over calendar_walk.py):
calendar skips are skipped runs with their reason and do not count for max_runs, a
backward shift is planned before its instant, and the resume count leaves skips out."""

from __future__ import annotations

import uuid
from datetime import UTC, date, datetime, timedelta

from cronwire.domain.calendars import CalendarPolicy, Exclusions
from cronwire.domain.model import DueSchedule, MisfirePolicy, RunStatus, SkipReason
from cronwire.domain.planning import due_on_resume, plan_schedule

TENANT = uuid.uuid4()


def _due(cron: str, cursor: datetime, exclusions: Exclusions, **fields: object) -> DueSchedule:
    return DueSchedule(uuid.uuid4(), TENANT, cron, "UTC", MisfirePolicy.FIRE_ALL, 7 * 86_400,
                       cursor, None, None, None, exclusions=exclusions, **fields)  # type: ignore[arg-type]


def test_calendar_skips_are_skipped_runs_and_do_not_count_for_max_runs() -> None:
    start = datetime(2027, 12, 20, tzinfo=UTC)
    skip = Exclusions.of(CalendarPolicy.SKIP, [("office", [date(2027, 12, 24), date(2027, 12, 25)])])
    s = _due("0 9 * * *", start, skip, max_runs=5)
    runs, advance = plan_schedule(s, start, start + timedelta(days=10))
    fired = [r.scheduled_for.day for r in runs if r.status is RunStatus.PENDING]
    skipped = [(r.scheduled_for.day, r.skip_reason) for r in runs if r.status is RunStatus.SKIPPED]
    assert fired == [20, 21, 22, 23, 26]  # five delivered, two skipped between them
    assert skipped == [(24, SkipReason.CALENDAR), (25, SkipReason.CALENDAR)]
    assert advance.planned == 5 and advance.completed and advance.next_fire_at is None


def test_a_backward_shift_is_planned_when_its_new_instant_is_due() -> None:
    # Mondays at 09:00; Monday 27 Dec excluded moves back to Friday 24 Dec. Planned on the
    # 24th with a minute's look-ahead, not on the 27th.
    back = Exclusions.of(CalendarPolicy.PREVIOUS_BUSINESS_DAY, [("office", [date(2027, 12, 27)])])
    friday = datetime(2027, 12, 24, 8, 59, 30, tzinfo=UTC)
    s = _due("0 9 * * MON", datetime(2027, 12, 24, 9, tzinfo=UTC), back)
    runs, advance = plan_schedule(s, friday, friday + timedelta(seconds=60))
    assert [r.scheduled_for for r in runs] == [datetime(2027, 12, 24, 9, tzinfo=UTC)]
    assert advance.next_fire_at == datetime(2028, 1, 3, 9, tzinfo=UTC)


def test_the_resume_count_leaves_calendar_skips_out() -> None:
    now = datetime(2027, 12, 27, 12, tzinfo=UTC)
    skip = Exclusions.of(CalendarPolicy.SKIP, [("office", [date(2027, 12, 24), date(2027, 12, 25)])])
    s = _due("0 9 * * *", datetime(2027, 12, 21, 9, tzinfo=UTC), skip)
    assert due_on_resume(s, now, 1000) == 7 - 2  # 21st..27th, two of them skipped
