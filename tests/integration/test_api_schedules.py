"""The schedule routes over real Postgres: create, read, list, edit, delete, pause/resume,
trigger, preview and secret rotation, and the container's wiring of them."""

from __future__ import annotations

import asyncio
import functools
import itertools
import time
import uuid
from datetime import datetime, timedelta

import asyncpg
import httpx
import pytest

from cronwire.adapters.postgres.planner_store import PostgresPlannerStore
from cronwire.api.app import create_app
from cronwire.bootstrap.container import build_container, init_resources, shutdown_resources
from cronwire.bootstrap.runtime import api_routers, build_runtime
from cronwire.config import Settings
from cronwire.domain.cron import next_occurrences
from cronwire.domain.model import PlannedRun
from cronwire.domain.planning import decide
from cronwire.domain.secrets import schedule_secret_context
from tests.support.api import Api, api_fixture  # noqa: F401 - the fixture
from tests.support.secrets import TEST_SECRET_KEYS, secret_box

pytestmark = pytest.mark.asyncio


def parse_time(text: str) -> datetime:
    assert text.endswith("Z"), text  # RFC 3339 UTC, as the contract says
    return datetime.fromisoformat(text)


async def db_now(pool: asyncpg.Pool) -> datetime:
    now: datetime = await pool.fetchval("SELECT now()")
    return now


async def plan_once(pool: asyncpg.Pool, lookahead_seconds: float) -> tuple[int, int]:
    """One real planner transaction (the planner's own store and decision)."""
    store = PostgresPlannerStore(pool)
    return await store.plan_due(
        limit=500, lookahead_seconds=lookahead_seconds,
        decide=functools.partial(decide, lookahead_seconds=lookahead_seconds),
    )


async def test_create_returns_the_schedule_and_its_secret_once(api: Api) -> None:
    tenant = await api.tenant()
    before = await db_now(api.pool)
    response = await api.client.post("/v1/schedules", json={
        "name": "nightly-report", "cron": "0 3 * * *", "timezone": "Europe/Berlin",
        "target": {"url": "http://127.0.0.1:9/hook"},
    }, headers=tenant.headers)
    assert response.status_code == 201, response.text
    created = response.json()
    assert response.headers["location"] == f"/v1/schedules/{created['id']}"
    assert created["signing_secret"].startswith("whsec_")
    assert created["tenant_id"] == str(tenant.id)
    assert created["status"] == "active" and created["paused"] is False
    # Defaults of the contract.
    assert created["target"] == {"url": "http://127.0.0.1:9/hook", "method": "POST",
                                 "headers": {}, "body": None, "tls": None}
    assert created["retry"] == {"max_attempts": 3, "initial_backoff_seconds": 10.0,
                                "max_backoff_seconds": 3600.0}
    assert created["misfire_policy"] == "fire_all"
    assert created["catchup_window_seconds"] == 3600
    expected = next_occurrences("0 3 * * *", "Europe/Berlin", before, 1)[0]
    assert parse_time(created["next_fire_at"]) == expected
    assert parse_time(created["created_at"]) >= before

    fetched = await api.client.get(f"/v1/schedules/{created['id']}", headers=tenant.headers)
    assert fetched.status_code == 200
    assert "signing_secret" not in fetched.json()
    assert fetched.json() == {k: v for k, v in created.items() if k != "signing_secret"}
    stored = await api.pool.fetchval("SELECT signing_secret FROM schedule WHERE id = $1",
                                     uuid.UUID(created["id"]))
    # Sealed at rest (ADR 0061); it opens to the secret shown once, for this row only.
    assert stored.startswith("cws1:") and created["signing_secret"] not in stored
    assert await secret_box(api.pool).unseal(
        tenant.id, stored, schedule_secret_context(uuid.UUID(created["id"]))
    ) == created["signing_secret"]


async def test_created_paused_schedule_is_not_planned(api: Api) -> None:
    tenant = await api.tenant()
    created = await api.create_schedule(tenant, cron="* * * * * *", paused=True)
    assert created["status"] == "paused" and created["paused"] is True
    assert await plan_once(api.pool, 5) == (0, 0)


async def test_list_pages_through_every_live_schedule_once(api: Api) -> None:
    tenant = await api.tenant()
    ids = [(await api.create_schedule(tenant, name=f"s{i}"))["id"] for i in range(5)]
    gone = ids.pop()
    assert (await api.client.delete(f"/v1/schedules/{gone}", headers=tenant.headers)).status_code == 204
    seen: list[str] = []
    pages = 0
    cursor: str | None = None
    while True:
        params = {"limit": 2, **({"cursor": cursor} if cursor else {})}
        page = (await api.client.get("/v1/schedules", params=params, headers=tenant.headers)).json()
        pages += 1
        seen += [item["id"] for item in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
        assert pages < 10
    assert seen == sorted(ids, key=uuid.UUID)
    assert pages == 2  # 2 + 2 and no empty third page


async def test_patch_recomputes_next_fire_at_only_when_timing_changes(api: Api) -> None:
    tenant = await api.tenant()
    created = await api.create_schedule(tenant)
    url = f"/v1/schedules/{created['id']}"
    renamed = (await api.client.patch(url, json={"name": "renamed"}, headers=tenant.headers)).json()
    assert renamed["name"] == "renamed"
    assert renamed["next_fire_at"] == created["next_fire_at"]
    assert parse_time(renamed["updated_at"]) > parse_time(created["updated_at"])

    before = await db_now(api.pool)
    response = await api.client.patch(
        url, json={"cron": "30 4 * * *", "timezone": "UTC"}, headers=tenant.headers)
    assert response.status_code == 200, response.text
    moved = response.json()
    assert (moved["cron"], moved["timezone"]) == ("30 4 * * *", "UTC")
    assert parse_time(moved["next_fire_at"]) == next_occurrences("30 4 * * *", "UTC", before, 1)[0]
    assert moved["target"] == created["target"]  # untouched fields stay

    # ends_at before the next fire: no further occurrence at all.
    ends = (before + timedelta(minutes=1)).isoformat()
    answer = await api.client.patch(url, json={"ends_at": ends}, headers=tenant.headers)
    assert answer.status_code == 200, answer.text
    ended = answer.json()
    assert ended["next_fire_at"] is None
    reopened = (await api.client.patch(url, json={"ends_at": None}, headers=tenant.headers)).json()
    assert reopened["next_fire_at"] == moved["next_fire_at"]


async def test_patching_the_cron_takes_back_the_old_timetables_runs_and_duplicates_none(
    api: Api,
) -> None:
    tenant = await api.tenant()
    created = await api.create_schedule(tenant, cron="* * * * * *", timezone="UTC")
    schedule_id = uuid.UUID(created["id"])
    claimed, first_inserted = await plan_once(api.pool, 5)
    assert claimed == 1 and first_inserted >= 5

    response = await api.client.patch(f"/v1/schedules/{schedule_id}",
                                      json={"cron": "*/2 * * * * *"}, headers=tenant.headers)
    assert response.status_code == 200, response.text
    patched_at = await db_now(api.pool)
    next_fire = parse_time(response.json()["next_fire_at"])
    kept = [r["scheduled_for"] for r in await api.pool.fetch(
        "SELECT scheduled_for FROM job_run WHERE schedule_id = $1 ORDER BY 1", schedule_id)]
    # Nothing of the old timetable that was not due yet is left to fire (ADR 0023) ...
    assert all(t <= patched_at for t in kept)
    # ... and the new cursor starts after what stays, on the new cron.
    after = max([patched_at - timedelta(seconds=1), *kept])
    assert next_fire > after and next_fire.second % 2 == 0

    _, second_inserted = await plan_once(api.pool, 20)
    assert second_inserted >= 5
    rows = await api.pool.fetch(
        "SELECT scheduled_for FROM job_run WHERE schedule_id = $1 ORDER BY 1", schedule_id)
    instants = [r["scheduled_for"] for r in rows]
    assert instants[: len(kept)] == kept
    assert all(t.second % 2 == 0 for t in instants[len(kept):])
    assert len(instants) == len(set(instants)) == len(kept) + second_inserted


async def test_delete_is_soft_cancels_unstarted_runs_and_keeps_history(api: Api) -> None:
    tenant = await api.tenant()
    created = await api.create_schedule(tenant)
    sid = created["id"]
    runs = [(await api.client.post(f"/v1/schedules/{sid}/trigger", headers=tenant.headers)).json()
            for _ in range(3)]
    running, finished, waiting = (uuid.UUID(r["id"]) for r in runs)
    await api.pool.execute("UPDATE job_run SET status = 'running', claimed_by = 'x', "
                           "claim_expires_at = now() + interval '1 minute' WHERE id = $1", running)
    await api.pool.execute("UPDATE job_run SET status = 'succeeded', finished_at = now() "
                           "WHERE id = $1", finished)

    response = await api.client.delete(f"/v1/schedules/{sid}", headers=tenant.headers)
    assert response.status_code == 204 and response.content == b""
    assert (await api.client.get(f"/v1/schedules/{sid}", headers=tenant.headers)).status_code == 404
    assert (await api.client.delete(f"/v1/schedules/{sid}", headers=tenant.headers)).status_code == 404
    listed = (await api.client.get("/v1/schedules", headers=tenant.headers)).json()
    assert listed["items"] == []
    row = await api.pool.fetchrow("SELECT status, next_fire_at, deleted_at FROM schedule "
                                  "WHERE id = $1", uuid.UUID(sid))
    assert row["status"] == "deleted" and row["next_fire_at"] is None
    assert row["deleted_at"] is not None

    history = (await api.client.get("/v1/runs", params={"schedule_id": sid},
                                    headers=tenant.headers)).json()
    status_of = {uuid.UUID(r["id"]): r["status"] for r in history["items"]}
    assert status_of == {running: "running", finished: "succeeded", waiting: "cancelled"}
    detail = await api.client.get(f"/v1/runs/{waiting}", headers=tenant.headers)
    assert detail.status_code == 200 and detail.json()["finished_at"] is not None
    # A deleted schedule accepts no more edits or triggers.
    for path in ("pause", "resume", "trigger", "rotate-secret"):
        answer = await api.client.post(f"/v1/schedules/{sid}/{path}", headers=tenant.headers)
        assert answer.status_code == 404, path


async def test_pause_stops_planning_and_resume_lets_the_misfire_policy_decide(api: Api) -> None:
    tenant = await api.tenant()
    created = await api.create_schedule(tenant, cron="* * * * *", timezone="UTC",
                                        misfire_policy="skip")
    sid = uuid.UUID(created["id"])
    paused = (await api.client.post(f"/v1/schedules/{sid}/pause", headers=tenant.headers)).json()
    assert paused["status"] == "paused" and paused["paused"] is True
    # Ten minutes pass while paused (the cursor is put back, as if time had run on).
    await api.pool.execute(
        "UPDATE schedule SET next_fire_at = date_trunc('minute', now()) - interval '10 minutes' "
        "WHERE id = $1", sid)
    assert await plan_once(api.pool, 5) == (0, 0)
    stale = await api.pool.fetchval("SELECT next_fire_at FROM schedule WHERE id = $1", sid)

    resumed = (await api.client.post(f"/v1/schedules/{sid}/resume", headers=tenant.headers)).json()
    assert resumed["status"] == "active" and resumed["paused"] is False
    assert parse_time(resumed["next_fire_at"]) == stale  # resume leaves the cursor alone

    now = await db_now(api.pool)
    assert (await plan_once(api.pool, 5))[0] == 1
    rows = await api.pool.fetch(
        "SELECT scheduled_for, status FROM job_run WHERE schedule_id = $1", sid)
    missed = [r for r in rows if r["scheduled_for"] < now - timedelta(seconds=60)]
    assert len(missed) >= 9
    assert {r["status"] for r in missed} == {"skipped"}  # policy "skip": none delivered


async def test_trigger_makes_a_manual_run_due_now(api: Api) -> None:
    tenant = await api.tenant()
    created = await api.create_schedule(tenant, paused=True)
    before = await db_now(api.pool)
    response = await api.client.post(f"/v1/schedules/{created['id']}/trigger",
                                     headers=tenant.headers)
    assert response.status_code == 202, response.text
    run = response.json()
    assert run["trigger"] == "manual" and run["status"] == "pending"
    assert run["schedule_id"] == created["id"] and run["attempt_count"] == 0
    at = parse_time(run["scheduled_for"])
    assert at.microsecond != 0
    assert before <= at <= await db_now(api.pool) + timedelta(seconds=1)
    assert run["fire_after"] == run["scheduled_for"]
    key = await api.pool.fetchval("SELECT idempotency_key FROM job_run WHERE id = $1",
                                  uuid.UUID(run["id"]))
    assert key == f"msg_{uuid.UUID(run['id']).hex}"


async def test_manual_trigger_in_the_same_second_as_an_occurrence(api: Api) -> None:
    """Cron occurrences are whole seconds; a manual run never is, so both coexist."""
    tenant = await api.tenant()
    created = await api.create_schedule(tenant, cron="* * * * * *", timezone="UTC")
    sid = uuid.UUID(created["id"])

    async def occurrence_in_the_next_second() -> datetime:
        second: datetime = await api.pool.fetchval(
            "SELECT date_trunc('second', clock_timestamp()) + interval '1 second'")
        occurrence = PlannedRun(schedule_id=sid, tenant_id=tenant.id, scheduled_for=second)
        await api.pool.execute(
            "INSERT INTO job_run (id, tenant_id, schedule_id, scheduled_for, idempotency_key, "
            "fire_after) VALUES ($1, $2, $3, $4, $5, $4)",
            occurrence.id, tenant.id, sid, second, occurrence.idempotency_key)
        return second

    occurrences = [await occurrence_in_the_next_second()]
    manual: list[datetime] = []
    deadline = time.monotonic() + 10
    while not any(t.replace(microsecond=0) in occurrences for t in manual):
        assert time.monotonic() < deadline, "no trigger landed in an occurrence's second"
        response = await api.client.post(f"/v1/schedules/{sid}/trigger", headers=tenant.headers)
        assert response.status_code == 202, response.text
        manual.append(parse_time(response.json()["scheduled_for"]))
        if manual[-1].replace(microsecond=0) > occurrences[-1]:
            # A stall of the loaded machine carried the triggers past that second: next one.
            occurrences.append(await occurrence_in_the_next_second())
        await asyncio.sleep(0.02)  # pacing the triggers, not waiting for a loop
    rows = await api.pool.fetch(
        "SELECT scheduled_for, trigger FROM job_run WHERE schedule_id = $1", sid)
    assert sorted(r["scheduled_for"] for r in rows) == sorted([*occurrences, *manual])
    assert [r["trigger"] for r in rows if r["scheduled_for"] in occurrences] == (
        ["schedule"] * len(occurrences))
    assert all(t not in occurrences and t.microsecond != 0 for t in manual)


async def test_preview_lists_fire_times_in_utc_and_local(api: Api) -> None:
    tenant = await api.tenant()
    created = await api.create_schedule(
        tenant, cron="0 3 * * *", timezone="Europe/Berlin",
        starts_at="2027-03-27T00:00:00Z", ends_at="2027-03-29T12:00:00Z")
    url = f"/v1/schedules/{created['id']}/preview"
    response = await api.client.get(url, params={"count": 5}, headers=tenant.headers)
    assert response.status_code == 200, response.text
    no_calendar = {"skipped": False, "shifted_from": None, "calendar": None}
    assert response.json()["items"] == [
        {"utc": "2027-03-27T02:00:00Z", "local": "2027-03-27T03:00:00+01:00", **no_calendar},
        {"utc": "2027-03-28T01:00:00Z", "local": "2027-03-28T03:00:00+02:00",  # DST begins
         **no_calendar},
        {"utc": "2027-03-29T01:00:00Z", "local": "2027-03-29T03:00:00+02:00", **no_calendar},
    ]  # ends_at stops the list before count is reached
    default = (await api.client.get(url, headers=tenant.headers)).json()
    assert len(default["items"]) == 3
    for bad in (0, 1001):
        answer = await api.client.get(url, params={"count": bad}, headers=tenant.headers)
        assert answer.status_code == 422 and answer.json()["error"]["field"] == "count"


async def test_preview_counts_from_the_database_clock(api: Api) -> None:
    tenant = await api.tenant()
    created = await api.create_schedule(tenant, cron="*/10 * * * *", timezone="UTC")
    before = await db_now(api.pool)
    items = (await api.client.get(f"/v1/schedules/{created['id']}/preview",
                                  params={"count": 1000}, headers=tenant.headers)).json()["items"]
    assert len(items) == 1000
    times = [parse_time(item["utc"]) for item in items]
    assert before < times[0] <= before + timedelta(minutes=10)
    assert times[0].minute % 10 == 0 and times[0].second == 0
    assert all(b - a == timedelta(minutes=10) for a, b in itertools.pairwise(times))


async def test_rotate_secret_keeps_the_old_one_signing_for_a_day(api: Api) -> None:
    tenant = await api.tenant()
    created = await api.create_schedule(tenant)
    sid = uuid.UUID(created["id"])
    response = await api.client.post(f"/v1/schedules/{sid}/rotate-secret", headers=tenant.headers)
    assert response.status_code == 200, response.text
    rotated = response.json()
    assert rotated["schedule_id"] == str(sid)
    assert rotated["signing_secret"].startswith("whsec_")
    assert rotated["signing_secret"] != created["signing_secret"]
    row = await api.pool.fetchrow(
        "SELECT signing_secret, previous_signing_secret, previous_secret_expires_at, "
        "previous_secret_expires_at - now() AS left FROM schedule WHERE id = $1", sid)
    box, context = secret_box(api.pool), schedule_secret_context(sid)
    assert await box.unseal(tenant.id, row["signing_secret"], context) == rotated["signing_secret"]
    assert await box.unseal(tenant.id, row["previous_signing_secret"],
                            context) == created["signing_secret"]
    assert timedelta(hours=23, minutes=59) < row["left"] <= timedelta(hours=24)
    assert parse_time(rotated["previous_secret_expires_at"]) == row["previous_secret_expires_at"]
    shown = (await api.client.get(f"/v1/schedules/{sid}", headers=tenant.headers)).json()
    assert shown["previous_secret_expires_at"] == rotated["previous_secret_expires_at"]


async def test_the_container_wires_the_tenant_api(database_url: str) -> None:
    settings = Settings(database_url=database_url, allow_private_targets=True,
                        tenant_max_schedules=1, db_pool_size=2,
                        secret_keys=TEST_SECRET_KEYS)
    container = build_container(settings)
    await init_resources(container)
    try:
        async def ready() -> dict[str, bool]:
            return {}

        runtime = await build_runtime(container)
        app = create_app(ready, lambda: b"", api_routers(runtime))
        issued = await runtime.tenants.create("wired")
        headers = {"Authorization": f"Bearer {issued.token}"}
        body = {"name": "one", "cron": "@hourly",
                "target": {"url": "http://127.0.0.1:9/"}}
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                     base_url="http://cronwire") as client:
            assert (await client.post("/v1/schedules", json=body, headers=headers)).status_code == 201
            # SCHEDULER_TENANT_MAX_SCHEDULES=1 reached the domain through the container.
            second = await client.post("/v1/schedules", json=body, headers=headers)
            assert second.status_code == 429
            assert second.json()["error"]["limit"] == "max_schedules"
            listed = (await client.get("/v1/schedules", headers=headers)).json()
            assert len(listed["items"]) == 1
            assert (await client.get("/v1/runs", headers=headers)).json()["items"] == []
    finally:
        await shutdown_resources(container)

