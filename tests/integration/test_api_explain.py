"""GET /v1/schedules/{id}/explain over real Postgres: one verdict per case, DST gap and
fold (overlap) included, each with a sentence that names its cause."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import Any

import pytest

from cronwire.domain.jitter import jittered
from cronwire.domain.model import idempotency_key_for, run_id_for
from tests.support.api import Api, Tenant, api_fixture  # noqa: F401 - fixture


async def _explain(api: Api, tenant: Tenant, schedule: dict[str, Any], at: datetime | str,
                   ) -> dict[str, Any]:
    text = at if isinstance(at, str) else at.isoformat().replace("+00:00", "Z")
    response = await api.client.get(f"/v1/schedules/{schedule['id']}/explain",
                                    params={"at": text}, headers=tenant.headers)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def _z(instant: datetime) -> str:
    return instant.isoformat().replace("+00:00", "Z")


async def _past_occurrence(api: Api) -> datetime:
    """A five-minute boundary ten to fifteen minutes ago (its partition exists)."""
    now: datetime = await api.pool.fetchval("SELECT now()")
    boundary = now.replace(minute=now.minute - now.minute % 5, second=0, microsecond=0)
    return boundary - timedelta(minutes=10)


async def _with_run(api: Api, tenant: Tenant, status: str, **run: Any) -> tuple[
        dict[str, Any], datetime]:
    schedule = await api.create_schedule(tenant, cron="*/5 * * * *", timezone="UTC")
    await api.pool.execute("UPDATE schedule SET created_at = now() - interval '1 day' "
                           "WHERE id = $1", uuid.UUID(schedule["id"]))
    occurrence = await _past_occurrence(api)
    run_id = run_id_for(uuid.UUID(schedule["id"]), occurrence)
    await api.pool.execute(
        """INSERT INTO job_run (id, tenant_id, schedule_id, scheduled_for, idempotency_key,
                                status, attempt_count, fire_after, first_attempt_at,
                                finished_at, last_status_code, last_error)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $4::timestamptz + interval '1 minute', $8, $9,
                   $10, $11)""",
        run_id, tenant.id, uuid.UUID(schedule["id"]), occurrence, idempotency_key_for(run_id),
        status, run.get("attempts", 1), run.get("first_attempt_at"), run.get("finished_at"),
        run.get("code"), run.get("error"))
    return schedule, occurrence


@pytest.mark.parametrize(("status", "run", "words"), [
    ("succeeded", {"code": 200}, "succeeded with HTTP 200 after 1 attempt"),
    ("failed", {"code": 404, "attempts": 3, "error": "HTTPStatus: 404 Not Found"},
     "failed after 3 attempts with HTTP 404 (HTTPStatus: 404 Not Found)"),
    ("retrying", {"code": 503, "error": "HTTPStatus: 503"}, "is retrying: attempt 1 failed"),
    ("pending", {}, "is planned and waits"),
    ("running", {}, "is being delivered now"),
    ("skipped", {"error": "missed while no planner ran"},
     "skipped by the misfire policy fire_all"),
    ("cancelled", {"error": "Cancelled: the schedule was deleted"}, "was cancelled"),
])
async def test_a_recorded_run_gives_its_status_and_why(
    api: Api, status: str, run: dict[str, Any], words: str
) -> None:
    tenant = await api.tenant()
    schedule, occurrence = await _with_run(api, tenant, status, **run)
    # Asked a little before the occurrence: the first occurrence at or after it is the run's.
    body = await _explain(api, tenant, schedule, occurrence - timedelta(seconds=90))
    assert body["occurrence"] == _z(occurrence)
    assert body["verdict"] == status
    assert words in body["reason"]
    assert body["run"]["id"] == str(run_id_for(uuid.UUID(schedule["id"]), occurrence))
    assert body["previous_occurrence"] == _z(occurrence - timedelta(minutes=5))
    assert body["next_occurrence"] == _z(occurrence + timedelta(minutes=5))


async def test_verdicts_without_a_run(api: Api) -> None:
    tenant = await api.tenant()
    now: datetime = await api.pool.fetchval("SELECT now()")
    later = (now + timedelta(days=2)).replace(microsecond=0)

    schedule = await api.create_schedule(tenant, cron="0 * * * *", timezone="UTC")
    body = await _explain(api, tenant, schedule, later)
    assert body["verdict"] == "not_planned_yet" and body["run"] is None
    assert body["occurrence"] == _z(later.replace(minute=0, second=0) + timedelta(hours=1)
                                    if later.minute or later.second else later)

    bounded = await api.create_schedule(tenant, cron="0 * * * *", timezone="UTC",
                                        starts_at=_z(now + timedelta(days=5)),
                                        ends_at=_z(now + timedelta(days=10)))
    body = await _explain(api, tenant, bounded, now + timedelta(days=1))
    assert body["verdict"] == "before_starts_at" and "starts_at" in body["reason"]
    body = await _explain(api, tenant, bounded, now + timedelta(days=11))
    assert body["verdict"] == "after_ends_at" and "ends_at" in body["reason"]

    paused = await api.create_schedule(tenant, cron="0 * * * *", timezone="UTC", paused=True)
    body = await _explain(api, tenant, paused, later)
    assert body["verdict"] == "paused" and "/resume" in body["reason"]

    body = await _explain(api, tenant, schedule, "2001-01-01T00:00:00Z")
    assert body["verdict"] == "no_run_recorded" and "retention" in body["reason"]

    # Planned past (the cursor is ahead of it), after the schedule existed, no run: the
    # misfire policy (or a pause) dropped it without a record.
    await api.pool.execute("UPDATE schedule SET created_at = now() - interval '1 day' "
                           "WHERE id = $1", uuid.UUID(schedule["id"]))
    body = await _explain(api, tenant, schedule, now - timedelta(hours=3))
    assert body["verdict"] == "no_run_recorded"
    assert "misfire policy fire_all" in body["reason"]


async def test_dst_gap_moves_a_wall_clock_time_and_drops_interval_times(api: Api) -> None:
    tenant = await api.tenant()
    wall = await api.create_schedule(tenant, cron="30 2 * * *", timezone="Europe/Berlin")
    body = await _explain(api, tenant, wall, "2027-03-28T00:00:00Z")  # 01:00 CET
    assert body["occurrence"] == "2027-03-28T01:00:00Z"  # 03:00 CEST, the gap's end
    assert body["reason"].startswith("DST moved it: 02:30 did not exist on 2027-03-28 in "
                                     "Europe/Berlin")
    assert "wall-clock schedule fires once at the end of the gap" in body["reason"]
    assert body["verdict"] == "not_planned_yet"
    assert body["previous_occurrence"] == "2027-03-27T01:30:00Z"
    assert body["next_occurrence"] == "2027-03-29T00:30:00Z"

    interval = await api.create_schedule(tenant, cron="*/30 * * * *", timezone="Europe/Berlin")
    body = await _explain(api, tenant, interval, "2027-03-28T00:45:00Z")  # 01:45 CET
    assert body["reason"].startswith("DST dropped 02:00 on 2027-03-28")
    assert "nothing fires inside the skipped hour" in body["reason"]
    assert body["occurrence"] == "2027-03-28T01:00:00Z"  # 03:00 CEST
    assert body["previous_occurrence"] == "2027-03-28T00:30:00Z"  # 01:30 CET


async def test_the_documented_example_is_explained_by_the_gap(api: Api) -> None:
    """docs/observability.md, the CLI help and the console hint all ask about
    2027-03-28T02:30:00+01:00: the wall time 02:30 Berlin skipped that night (the instant it
    spells, 01:30Z, lies after the jump). It names the occurrence DST moved to 03:00 CEST,
    not the next day's; so does the transition instant itself."""
    tenant = await api.tenant()
    wall = await api.create_schedule(tenant, cron="30 2 * * *", timezone="Europe/Berlin")
    for at in ("2027-03-28T02:30:00+01:00", "2027-03-28T02:30:00+02:00",
               "2027-03-28T01:00:00Z", "2027-03-28T03:00:00+02:00"):
        body = await _explain(api, tenant, wall, at)
        assert body["occurrence"] == "2027-03-28T01:00:00Z", at
        assert body["reason"].startswith("DST moved it: 02:30 did not exist on 2027-03-28 "
                                         "in Europe/Berlin (the clocks jumped forward at "
                                         "2027-03-28 03:00:00 CEST)"), (at, body["reason"])
        assert body["previous_occurrence"] == "2027-03-27T01:30:00Z"
        assert body["next_occurrence"] == "2027-03-29T00:30:00Z"
    # An ordinary time after the gap is the next day's, with no DST note.
    after = await _explain(api, tenant, wall, "2027-03-28T03:30:00+02:00")
    assert after["occurrence"] == "2027-03-29T00:30:00Z"
    assert not after["reason"].startswith("DST")
    # A schedule whose time is outside the gap is not explained by it.
    three = await api.create_schedule(tenant, cron="0 3 * * *", timezone="Europe/Berlin")
    ordinary = await _explain(api, tenant, three, "2027-03-28T02:30:00+01:00")
    assert ordinary["occurrence"] == "2027-03-28T01:00:00Z"
    assert not ordinary["reason"].startswith("DST")


async def test_dst_fold_drops_the_repeat_of_a_wall_clock_time(api: Api) -> None:
    tenant = await api.tenant()
    wall = await api.create_schedule(tenant, cron="30 2 * * *", timezone="Europe/Berlin")
    # 02:00 CET, the second pass after the clocks fell back: the first 02:30 (00:30Z) fired,
    # its repeat (01:30Z) does not.
    body = await _explain(api, tenant, wall, "2027-10-31T01:00:00Z")
    assert body["reason"].startswith("DST dropped the repeat of 02:30 on 2027-10-31")
    assert "2027-10-31T00:30:00Z" in body["reason"]
    assert body["occurrence"] == "2027-11-01T01:30:00Z"
    first = await _explain(api, tenant, wall, "2027-10-31T00:00:00Z")
    assert first["occurrence"] == "2027-10-31T00:30:00Z"
    assert "a wall-clock schedule fires once, at the first" in first["reason"]


async def test_the_first_and_last_instants_an_api_accepts_are_explained(api: Api) -> None:
    tenant = await api.tenant()
    schedule = await api.create_schedule(tenant, cron="0 0 1 1 *", timezone="Pacific/Kiritimati")
    first = await _explain(api, tenant, schedule, "0001-01-02T00:00:00Z")
    assert first["previous_occurrence"] is None and first["occurrence"] is not None
    last = await _explain(api, tenant, schedule, "9999-12-30T00:00:00Z")
    assert last["occurrence"] is None and last["verdict"] == "no_run_recorded"


async def test_explain_refuses_a_missing_instant_and_another_tenants_schedule(api: Api) -> None:
    owner, other = await api.tenant("owner"), await api.tenant("other")
    schedule = await api.create_schedule(owner)
    missing = await api.client.get(f"/v1/schedules/{schedule['id']}/explain",
                                   headers=owner.headers)
    assert missing.status_code == 422 and "at" in missing.json()["error"]["message"]
    bad = await api.client.get(f"/v1/schedules/{schedule['id']}/explain",
                               params={"at": "yesterday"}, headers=owner.headers)
    assert bad.status_code == 422
    foreign = await api.client.get(f"/v1/schedules/{schedule['id']}/explain",
                                   params={"at": "2027-01-01T00:00:00Z"}, headers=other.headers)
    assert foreign.status_code == 404


async def test_a_run_skipped_by_the_overlap_policy_says_so(api: Api) -> None:
    tenant = await api.tenant()
    schedule, occurrence = await _with_run(api, tenant, "skipped")
    await api.pool.execute("UPDATE job_run SET skip_reason = 'overlap' WHERE schedule_id = $1",
                           uuid.UUID(schedule["id"]))
    patched = await api.client.patch(f"/v1/schedules/{schedule['id']}",
                                     json={"overlap_policy": "skip"}, headers=tenant.headers)
    assert patched.status_code == 200, patched.text
    body = await _explain(api, tenant, schedule, occurrence)
    assert body["verdict"] == "skipped" and body["run"]["skip_reason"] == "overlap"
    assert "skipped by the overlap policy" in body["reason"]
    assert "overlap_policy is now skip" in body["reason"]
    assert "misfire" not in body["reason"]


async def test_a_paused_schedule_gives_its_pause_note(api: Api) -> None:
    tenant = await api.tenant()
    now: datetime = await api.pool.fetchval("SELECT now()")
    schedule = await api.create_schedule(tenant, cron="0 * * * *", timezone="UTC")
    paused = await api.client.post(f"/v1/schedules/{schedule['id']}/pause",
                                   json={"note": "vendor outage, ticket 42"},
                                   headers=tenant.headers)
    assert paused.status_code == 200, paused.text
    body = await _explain(api, tenant, schedule, now + timedelta(days=2))
    assert body["verdict"] == "paused"
    assert f"paused since {paused.json()['paused_at']} (vendor outage, ticket 42)" in (
        body["reason"])


async def test_a_completed_schedule_says_completed(api: Api) -> None:
    tenant = await api.tenant()
    now: datetime = await api.pool.fetchval("SELECT now()")
    limited = await api.create_schedule(tenant, cron="0 * * * *", timezone="UTC", max_runs=2)
    last = now.replace(minute=0, second=0, microsecond=0)
    # What the planner leaves once it planned max_runs occurrences (schedule_advance).
    await api.pool.execute("UPDATE schedule SET status = 'completed', runs_planned = 2, "
                           "last_fire_at = $2, next_fire_at = $2::timestamptz + interval '1 hour' "
                           "WHERE id = $1", uuid.UUID(limited["id"]), last)
    body = await _explain(api, tenant, limited, now + timedelta(days=1))
    assert body["verdict"] == "completed"
    assert f"max_runs (2) occurrences were planned, the last at {_z(last)}" in body["reason"]

    at = (now + timedelta(days=3)).replace(microsecond=0)
    once = await api.create_schedule(tenant, cron=None, at=_z(at), timezone="UTC")
    body = await _explain(api, tenant, once, now)
    assert (body["verdict"], body["occurrence"]) == ("not_planned_yet", _z(at))
    assert body["previous_occurrence"] is None and body["next_occurrence"] is None
    await api.pool.execute("UPDATE schedule SET status = 'completed', runs_planned = 1, "
                           "last_fire_at = run_at WHERE id = $1", uuid.UUID(once["id"]))
    body = await _explain(api, tenant, once, at + timedelta(hours=1))
    assert (body["verdict"], body["occurrence"]) == ("completed", None)
    assert "one-time schedule fires once" in body["reason"]
    assert body["previous_occurrence"] == _z(at)


async def test_jitter_shows_when_an_occurrence_is_delivered(api: Api) -> None:
    tenant = await api.tenant()
    now: datetime = await api.pool.fetchval("SELECT now()")
    schedule = await api.create_schedule(tenant, cron="0 * * * *", timezone="UTC",
                                         jitter_seconds=600)
    later = (now + timedelta(days=2)).replace(minute=0, second=0, microsecond=0)
    body = await _explain(api, tenant, schedule, later)
    delivered = jittered(uuid.UUID(schedule["id"]), later, 600)
    assert body["verdict"] == "not_planned_yet"
    assert f"with jitter_seconds 600 it is delivered at {_z(delivered)}" in body["reason"]

    jittered_run, occurrence = await _with_run(api, tenant, "pending")  # fire_after +1 minute
    await api.client.patch(f"/v1/schedules/{jittered_run['id']}", json={"jitter_seconds": 120},
                           headers=tenant.headers)
    body = await _explain(api, tenant, jittered_run, occurrence)
    assert body["run"]["fire_after"] == _z(occurrence + timedelta(minutes=1))
    assert "(its occurrence plus 60.000s of jitter)" in body["reason"]


async def test_a_pending_run_of_a_keyed_schedule_names_its_flow_control_key(api: Api) -> None:
    tenant = await api.tenant()
    schedule, occurrence = await _with_run(api, tenant, "pending")
    response = await api.client.patch(f"/v1/schedules/{schedule['id']}",
                                      json={"flow_control": {"key": "billing-api",
                                                             "max_concurrency": 2}},
                                      headers=tenant.headers)
    assert response.status_code == 200, response.text
    body = await _explain(api, tenant, schedule, occurrence - timedelta(seconds=90))
    assert body["verdict"] == "pending"
    assert "or for a slot of its flow-control key 'billing-api'" in body["reason"]
