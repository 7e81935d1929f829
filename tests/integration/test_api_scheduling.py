"""The scheduling semantics through the API on real Postgres: the new schedule fields and
their 422s, one-time schedules, pause notes, backfill and replay (CONTRACT.md, "Scheduling
semantics")."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from cronwire.adapters.postgres.sql import queries
from cronwire.domain.backfill import MAX_BACKFILL
from cronwire.domain.model import idempotency_key_for, run_id_for
from tests.support.api import Api, Tenant, api_fixture, schedule_body  # noqa: F401 - fixture


def iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


async def db_now(api: Api) -> datetime:
    now: datetime = await api.pool.fetchval("SELECT now()")
    return now


async def error_of(response: Any) -> tuple[int, str | None, str | None]:
    error = response.json()["error"]
    return response.status_code, error["field"], error.get("limit")


async def test_the_new_fields_round_trip_with_their_defaults(api: Api) -> None:
    tenant = await api.tenant()
    plain = await api.create_schedule(tenant)
    assert (plain["overlap_policy"], plain["jitter_seconds"], plain["max_runs"],
            plain["pause_after_failures"], plain["at"], plain["paused_reason"],
            plain["paused_at"], plain["runs_planned"], plain["consecutive_failures"]) == (
        "allow", 0, None, None, None, None, None, 0, 0)
    shaped = await api.create_schedule(tenant, overlap_policy="buffer_all", jitter_seconds=60,
                                       max_runs=3, pause_after_failures=5)
    got = (await api.client.get(f"/v1/schedules/{shaped['id']}", headers=tenant.headers)).json()
    assert (got["overlap_policy"], got["jitter_seconds"], got["max_runs"],
            got["pause_after_failures"]) == ("buffer_all", 60, 3, 5)
    patched = await api.client.patch(f"/v1/schedules/{shaped['id']}", headers=tenant.headers,
                                     json={"overlap_policy": None, "jitter_seconds": None,
                                           "max_runs": None, "pause_after_failures": 2})
    assert patched.status_code == 200, patched.text
    body = patched.json()
    assert (body["overlap_policy"], body["jitter_seconds"], body["max_runs"],
            body["pause_after_failures"]) == ("allow", 0, None, 2)


@pytest.mark.parametrize(("overrides", "field"), [
    ({"at": "2030-01-01T00:00:00Z"}, "at"),  # with the body's cron: exactly one of the two
    ({"cron": None}, "cron"),  # neither
    ({"cron": None, "at": "2030-01-01T00:00:00Z", "starts_at": "2029-01-01T00:00:00Z"},
     "starts_at"),
    ({"cron": None, "at": "2030-01-01T00:00:00Z", "max_runs": 2}, "max_runs"),
    ({"jitter_seconds": 3601}, "jitter_seconds"),
    ({"jitter_seconds": -1}, "jitter_seconds"),
    ({"jitter_seconds": "5"}, "jitter_seconds"),
    ({"max_runs": 0}, "max_runs"),
    ({"max_runs": 1_000_001}, "max_runs"),
    ({"pause_after_failures": 0}, "pause_after_failures"),
    ({"pause_after_failures": 101}, "pause_after_failures"),
    ({"overlap_policy": "queue"}, "overlap_policy"),
    ({"at": "2030-01-01"}, "at"),
])
async def test_bad_combinations_and_ranges_are_422_naming_the_field(
    api: Api, overrides: dict[str, Any], field: str,
) -> None:
    tenant = await api.tenant()
    response = await api.client.post("/v1/schedules", json=schedule_body(**overrides),
                                     headers=tenant.headers)
    assert await error_of(response) == (422, field, None), response.text
    assert response.json()["error"]["message"].startswith(f"{field}: ")
    assert await api.pool.fetchval("SELECT count(*) FROM schedule") == 0


async def test_a_one_time_schedule_is_planned_at_its_instant(api: Api) -> None:
    tenant = await api.tenant()
    at = (await db_now(api) + timedelta(days=2)).replace(microsecond=0)
    created = await api.create_schedule(tenant, cron=None, at=iso(at))
    assert created["cron"] is None and created["at"] == iso(at)
    assert created["next_fire_at"] == iso(at) and created["status"] == "active"
    preview = (await api.client.get(f"/v1/schedules/{created['id']}/preview",
                                    headers=tenant.headers)).json()
    assert [item["utc"] for item in preview["items"]] == [iso(at)]
    # Back to a cron schedule, and again to a one-time one: the other field goes null.
    to_cron = await api.client.patch(f"/v1/schedules/{created['id']}", headers=tenant.headers,
                                     json={"cron": "0 4 * * *", "at": None})
    assert to_cron.status_code == 200 and to_cron.json()["at"] is None
    both = await api.client.patch(f"/v1/schedules/{created['id']}", headers=tenant.headers,
                                  json={"at": iso(at)})
    assert await error_of(both) == (422, "at", None)


async def test_pause_keeps_the_note_and_resume_clears_it(api: Api) -> None:
    tenant = await api.tenant()
    created = await api.create_schedule(tenant)
    path = f"/v1/schedules/{created['id']}"
    paused = await api.client.post(f"{path}/pause", headers=tenant.headers,
                                   json={"note": "target migrating; back Monday"})
    assert paused.status_code == 200
    assert (paused.json()["status"], paused.json()["paused_reason"]) == (
        "paused", "target migrating; back Monday")
    assert paused.json()["paused_at"] is not None
    again = (await api.client.post(f"{path}/pause", headers=tenant.headers)).json()
    assert again["paused_reason"] == "target migrating; back Monday"  # kept without a note
    assert again["paused_at"] == paused.json()["paused_at"]
    resumed = (await api.client.post(f"{path}/resume", headers=tenant.headers)).json()
    assert (resumed["status"], resumed["paused_reason"], resumed["paused_at"]) == (
        "active", None, None)
    empty = await api.client.post(f"{path}/pause", headers=tenant.headers,
                                  json={"note": ""})
    assert await error_of(empty) == (422, "note", None)
    unknown = await api.client.post(f"{path}/pause", headers=tenant.headers,
                                    json={"reason": "x"})
    assert (await error_of(unknown))[0] == 422


async def test_a_completed_schedule_cannot_be_paused_or_resumed_but_can_be_given_more(
    api: Api,
) -> None:
    tenant = await api.tenant()
    created = await api.create_schedule(tenant, max_runs=2)
    await api.pool.execute("UPDATE schedule SET status = 'completed', runs_planned = 2, "
                           "next_fire_at = NULL WHERE id = $1", uuid.UUID(created["id"]))
    path = f"/v1/schedules/{created['id']}"
    for action in ("pause", "resume"):
        response = await api.client.post(f"{path}/{action}", headers=tenant.headers)
        assert response.status_code == 409, response.text
        assert "completed" in response.json()["error"]["message"]
    more = (await api.client.patch(path, headers=tenant.headers, json={"max_runs": 3})).json()
    assert more["status"] == "active" and more["next_fire_at"] is not None


async def _hourly(api: Api, tenant: Tenant, **overrides: Any) -> dict[str, Any]:
    return await api.create_schedule(tenant, cron="0 * * * *", timezone="UTC", **overrides)


async def test_backfill_writes_one_run_per_missing_occurrence_and_reports_existing(
    api: Api,
) -> None:
    tenant = await api.tenant()
    schedule = await _hourly(api, tenant)
    sid = uuid.UUID(schedule["id"])
    end = (await db_now(api)).replace(minute=0, second=0, microsecond=0) - timedelta(hours=1)
    start = end - timedelta(hours=24)
    taken = start + timedelta(hours=5)
    await api.pool.execute(
        "INSERT INTO job_run (id, tenant_id, schedule_id, scheduled_for, idempotency_key, "
        "status, fire_after) VALUES ($1, $2, $3, $4, $5, 'succeeded', $4)",
        run_id_for(sid, taken), tenant.id, sid, taken, idempotency_key_for(run_id_for(sid, taken)))
    path = f"/v1/schedules/{sid}/backfill"
    body = {"start": iso(start), "end": iso(end)}
    dry = await api.client.post(path, headers=tenant.headers, json={**body, "dry_run": True})
    assert dry.status_code == 200, dry.text
    assert dry.json() == {"occurrences": 24, "created": 0, "existing": 1,
                          "first": [iso(start + timedelta(hours=h)) for h in range(24)],
                          "over_limit": None}  # the 23 fit under max_pending_runs
    assert await api.pool.fetchval("SELECT count(*) FROM job_run") == 1  # wrote nothing
    real = await api.client.post(path, headers=tenant.headers, json=body)
    assert real.status_code == 202
    assert {k: real.json()[k] for k in ("occurrences", "created", "existing")} == {
        "occurrences": 24, "created": 23, "existing": 1}
    rows = await api.pool.fetch("SELECT trigger, status, fire_after <= now() AS due "
                                "FROM job_run WHERE schedule_id = $1 AND scheduled_for <> $2",
                                sid, taken)
    assert {(r["trigger"], r["status"], r["due"]) for r in rows} == {("backfill", "pending", True)}
    again = (await api.client.post(path, headers=tenant.headers, json=body)).json()
    assert (again["created"], again["existing"]) == (0, 24)  # never a second run
    runs = (await api.client.get("/v1/runs", params={"schedule_id": str(sid), "limit": 200},
                                 headers=tenant.headers)).json()["items"]
    assert sorted(r["trigger"] for r in runs) == ["backfill"] * 23 + ["schedule"]


async def test_backfill_refusals_name_the_limit_or_the_field(api: Api) -> None:
    tenant = await api.tenant()
    every_second = await api.create_schedule(tenant, cron="* * * * * *", timezone="UTC")
    path = f"/v1/schedules/{every_second['id']}/backfill"
    now = (await db_now(api)).replace(microsecond=0)
    too_many = await api.client.post(path, headers=tenant.headers, json={
        "start": iso(now - timedelta(hours=3)), "end": iso(now - timedelta(minutes=1))})
    assert await error_of(too_many) == (422, "end", "max_backfill_occurrences")
    assert f"{MAX_BACKFILL:,}" in too_many.json()["error"]["message"]
    exactly = await api.client.post(path, headers=tenant.headers, json={
        "start": iso(now - timedelta(seconds=MAX_BACKFILL + 60)),
        "end": iso(now - timedelta(seconds=60)), "dry_run": True})
    assert exactly.status_code == 200 and exactly.json()["occurrences"] == MAX_BACKFILL
    future = await api.client.post(path, headers=tenant.headers, json={
        "start": iso(now - timedelta(minutes=1)), "end": iso(now + timedelta(hours=1))})
    assert await error_of(future) == (422, "end", None)
    backwards = await api.client.post(path, headers=tenant.headers, json={
        "start": iso(now - timedelta(minutes=1)), "end": iso(now - timedelta(minutes=2))})
    assert await error_of(backwards) == (422, "end", None)
    ancient = await api.client.post(path, headers=tenant.headers, json={
        "start": "2001-01-01T00:00:00Z", "end": "2001-01-01T00:01:00Z"})
    assert await error_of(ancient) == (422, "start", None)
    assert await api.pool.fetchval("SELECT count(*) FROM job_run") == 0


async def test_backfill_follows_the_schedules_zone_and_dst(api: Api) -> None:
    """30 2 * * * in Berlin across the spring-forward night (2026-03-29): that local time
    does not exist, so it fires once at 03:00 (the first valid minute after the gap)."""
    # Run history back to March 2026 (contiguous with the partitions the migration made).
    await api.pool.execute(
        "SELECT cronwire_ensure_partitions('2026-03-01', ((extract(year FROM now()) - 2026) "
        "* 12 + extract(month FROM now()) - 3)::integer)")
    tenant = await api.tenant()
    schedule = await api.create_schedule(tenant, cron="30 2 * * *", timezone="Europe/Berlin")
    response = await api.client.post(
        f"/v1/schedules/{schedule['id']}/backfill", headers=tenant.headers,
        json={"start": "2026-03-28T00:00:00Z", "end": "2026-03-31T00:00:00Z", "dry_run": True})
    assert response.status_code == 200, response.text
    assert response.json()["first"] == ["2026-03-28T01:30:00Z", "2026-03-29T01:00:00Z",
                                        "2026-03-30T00:30:00Z"]


async def test_a_backfill_takes_the_requested_overlap_policy(api: Api) -> None:
    tenant = await api.tenant()
    schedule = await _hourly(api, tenant, overlap_policy="skip")
    end = (await db_now(api)).replace(minute=0, second=0, microsecond=0) - timedelta(hours=1)
    path = f"/v1/schedules/{schedule['id']}/backfill"
    window = {"start": iso(end - timedelta(hours=2)), "end": iso(end - timedelta(hours=1))}
    await api.client.post(path, headers=tenant.headers, json=window)
    window2 = {"start": iso(end - timedelta(hours=1)), "end": iso(end),
               "overlap_policy": "allow"}
    await api.client.post(path, headers=tenant.headers, json=window2)
    policies = [r["overlap_policy"] for r in await api.pool.fetch(
        "SELECT overlap_policy FROM job_run ORDER BY scheduled_for")]
    assert policies == ["skip", None]
    bad = await api.client.post(path, headers=tenant.headers, json={**window,
                                                                     "overlap_policy": "x"})
    assert await error_of(bad) == (422, "overlap_policy", None)


async def _failed_run(api: Api, tenant: Tenant, schedule_id: uuid.UUID,
                      at: datetime) -> uuid.UUID:
    run_id = run_id_for(schedule_id, at)
    await api.pool.execute(
        "INSERT INTO job_run (id, tenant_id, schedule_id, scheduled_for, idempotency_key, "
        "status, fire_after, attempt_count, finished_at, last_error) "
        "VALUES ($1, $2, $3, $4, $5, 'failed', $4, 3, now(), 'HTTPStatus: 503')",
        run_id, tenant.id, schedule_id, at, idempotency_key_for(run_id))
    return run_id


async def test_replay_makes_a_new_run_once_per_failed_run(api: Api) -> None:
    tenant = await api.tenant()
    schedule = await _hourly(api, tenant)
    sid = uuid.UUID(schedule["id"])
    at = (await db_now(api)).replace(minute=0, second=0, microsecond=0) - timedelta(hours=3)
    failed = await _failed_run(api, tenant, sid, at)
    response = await api.client.post(f"/v1/runs/{failed}/replay", headers=tenant.headers)
    assert response.status_code == 202, response.text
    replay = response.json()
    assert (replay["trigger"], replay["replay_of"], replay["status"]) == (
        "replay", str(failed), "pending")
    instant = datetime.fromisoformat(replay["scheduled_for"])
    assert instant.microsecond != 0 and instant > at  # never an occurrence's slot
    assert replay["id"] != str(failed)
    again = await api.client.post(f"/v1/runs/{failed}/replay", headers=tenant.headers)
    assert again.status_code == 409 and replay["id"] in again.json()["error"]["message"]
    not_failed = await api.client.post(f"/v1/runs/{replay['id']}/replay", headers=tenant.headers)
    assert not_failed.status_code == 409 and "pending" in not_failed.json()["error"]["message"]
    missing = await api.client.post(f"/v1/runs/{uuid.uuid4()}/replay", headers=tenant.headers)
    assert missing.status_code == 404
    keys = await api.pool.fetch("SELECT idempotency_key FROM job_run")
    assert len({k["idempotency_key"] for k in keys}) == 2  # a new webhook-id


async def test_bulk_replay_takes_the_dead_letters_oldest_first_within_the_limit(api: Api) -> None:
    tenant = await api.tenant()
    schedule = await _hourly(api, tenant)
    sid = uuid.UUID(schedule["id"])
    base = (await db_now(api)).replace(minute=0, second=0, microsecond=0) - timedelta(hours=10)
    failed = [await _failed_run(api, tenant, sid, base + timedelta(hours=h)) for h in range(5)]
    first = await api.client.post("/v1/runs/replay", headers=tenant.headers,
                                  json={"status": "failed", "limit": 3})
    assert first.status_code == 202
    assert first.json()["replayed"] == 3 and len(first.json()["runs"]) == 3
    replayed_of = [r["replay_of"] for r in await api.pool.fetch(
        "SELECT replay_of FROM job_run WHERE trigger = 'replay' ORDER BY replay_of_scheduled_for")]
    assert replayed_of == failed[:3]
    rest = (await api.client.post("/v1/runs/replay", headers=tenant.headers,
                                  json={"status": "failed", "schedule_id": str(sid)})).json()
    assert rest["replayed"] == 2
    none = (await api.client.post("/v1/runs/replay", headers=tenant.headers,
                                  json={"status": "failed"})).json()
    assert none == {"replayed": 0, "runs": []}
    for body, field in (({"status": "failed", "limit": 1001}, "limit"),
                        ({"status": "succeeded"}, "status"),
                        ({"status": "failed", "since": "2027-01-02T00:00:00Z",
                          "until": "2027-01-01T00:00:00Z"}, "until")):
        response = await api.client.post("/v1/runs/replay", headers=tenant.headers, json=body)
        assert await error_of(response) == (422, field, None), response.text


async def test_a_misfire_skip_shows_its_reason(api: Api) -> None:
    tenant = await api.tenant()
    schedule = await _hourly(api, tenant)
    at = (await db_now(api)).replace(minute=0, second=0, microsecond=0) - timedelta(hours=1)
    sid = uuid.UUID(schedule["id"])
    # The planner's own statement writes a misfire skip (the planner's decision: tested in
    # test_planner.py); its row must show why.
    await api.pool.execute(
        queries()["job_run_insert_planned"], [run_id_for(sid, at)], [tenant.id], [sid], [at],
        [idempotency_key_for(run_id_for(sid, at))], ["schedule"], ["skipped"], None, None, None,
        None)
    [run] = (await api.client.get("/v1/runs", params={"schedule_id": str(sid)},
                                  headers=tenant.headers)).json()["items"]
    assert (run["status"], run["skip_reason"]) == ("skipped", "misfire")
