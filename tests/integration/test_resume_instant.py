"""A resume hands the planner the instant it counted its missed runs at
(schedule.resumed_at, migration 0031), over the API on real Postgres."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime

from cronwire.adapters.postgres.planner_store import PostgresPlannerStore
from cronwire.domain.model import DueSchedule, PlanDecision
from cronwire.domain.planning import Span, decide
from tests.integration.test_api_schedules import db_now
from tests.support.api import Api, api_fixture  # noqa: F401 - the fixture


async def test_a_resume_hands_the_planner_the_instant_it_counted_at(api: Api) -> None:
    """schedule.resumed_at (migration 0031): set by a resume of a paused schedule, to an
    instant between the request's start and its answer, read by the planner's claim into
    the DueSchedule it judges (planning.judged_at); a resume of an active schedule and a
    pause leave it alone."""
    tenant = await api.tenant()
    created = await api.create_schedule(tenant, cron="* * * * *", timezone="UTC",
                                        misfire_policy="fire_all", paused=True)
    sid = uuid.UUID(created["id"])
    await api.pool.execute(
        "UPDATE schedule SET next_fire_at = date_trunc('minute', now()) - interval '10 minutes' "
        "WHERE id = $1", sid)
    assert await api.pool.fetchval("SELECT resumed_at FROM schedule WHERE id = $1", sid) is None
    before = await db_now(api.pool)
    resumed = (await api.client.post(f"/v1/schedules/{sid}/resume", headers=tenant.headers)).json()
    after = await db_now(api.pool)
    instant = await api.pool.fetchval("SELECT resumed_at FROM schedule WHERE id = $1", sid)
    assert before <= instant <= after and resumed["runs_due"] >= 10
    again = await api.client.post(f"/v1/schedules/{sid}/resume", headers=tenant.headers)
    assert again.status_code == 200, again.text
    assert await api.pool.fetchval("SELECT resumed_at FROM schedule WHERE id = $1", sid) == instant

    seen: list[DueSchedule] = []

    def capturing(due: Sequence[DueSchedule], now: datetime, writable: Span | None) -> PlanDecision:
        seen.extend(due)
        return decide(due, now, writable, lookahead_seconds=5)

    await PostgresPlannerStore(api.pool).plan_due(limit=500, lookahead_seconds=5, decide=capturing)
    assert [(d.id, d.resumed_at) for d in seen] == [(sid, instant)]
    delivering = await api.pool.fetchval(
        "SELECT count(*) FROM job_run WHERE schedule_id = $1 AND status <> 'skipped' "
        "AND scheduled_for <= $2", sid, instant)
    assert delivering == resumed["runs_due"]
    await api.client.post(f"/v1/schedules/{sid}/pause", headers=tenant.headers)
    assert await api.pool.fetchval("SELECT resumed_at FROM schedule WHERE id = $1", sid) == instant
