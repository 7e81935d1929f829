"""Calendars through the API on real Postgres (CONTRACT.md, "Calendars"; ADR 0064): made
from dates or the holidays package, refused with 422s naming the field, confined to their
tenant, excluded by schedules (shown by GET, preview and explain), a calendar in use
answering 409, an edit re-planning what was planned ahead, calendar skips counted by the
stats and every change in the audit log."""

from __future__ import annotations

import uuid
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest

from cronwire.adapters.postgres.planner_store import PostgresPlannerStore
from cronwire.domain.planning import decide
from tests.support.api import Api, Tenant, api_fixture  # noqa: F401 - fixture

LOOKAHEAD = 3 * 86_400.0


def iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def field_of(response: Any) -> tuple[int, str | None]:
    return response.status_code, response.json()["error"]["field"]


async def _calendar(api: Api, tenant: Tenant, **body: Any) -> dict[str, Any]:
    response = await api.client.post("/v1/calendars", json=body, headers=tenant.headers)
    assert response.status_code == 201, response.text
    made: dict[str, Any] = response.json()
    return made


async def test_a_calendar_from_the_holidays_package_keeps_its_source(api: Api) -> None:
    tenant = await api.tenant()
    made = await _calendar(api, tenant, name="by-holidays",
                           holidays={"country": "de", "subdivision": "by", "years": [2026]})
    assert made["holidays"] == {"country": "DE", "subdivision": "BY", "years": [2026]}
    assert "2026-12-25" in made["dates"] and "2026-01-06" in made["dates"]  # Epiphany in BY
    got = await api.client.get(f"/v1/calendars/{made['id']}", headers=tenant.headers)
    assert got.status_code == 200 and got.json() == made
    listed = await api.client.get("/v1/calendars", headers=tenant.headers)
    assert [c["name"] for c in listed.json()["items"]] == ["by-holidays"]


@pytest.mark.parametrize(("body", "field"), [
    ({"holidays": {"country": "XX", "years": [2026]}}, "holidays.country"),
    ({"holidays": {"country": "DE", "subdivision": "ZZ", "years": [2026]}},
     "holidays.subdivision"),
    ({"holidays": {"country": "DE", "years": list(range(2020, 2031))}}, "holidays.years"),
    ({"holidays": {"country": "DE", "years": [1066]}}, "holidays.years"),
    ({"dates": ["2026-12-25"], "holidays": {"country": "DE", "years": [2026]}}, "dates"),
    ({}, "dates"),
    ({"dates": [(date(2026, 1, 1) + timedelta(days=i)).isoformat() for i in range(1001)]},
     "dates"),
    ({"dates": ["2026-02-30"]}, "dates"),
])
async def test_bad_calendars_are_422_naming_the_field(api: Api, body: dict[str, Any],
                                                       field: str) -> None:
    tenant = await api.tenant()
    response = await api.client.post("/v1/calendars", json={"name": "bad", **body},
                                     headers=tenant.headers)
    assert field_of(response) == (422, field), response.text


async def test_names_are_unique_and_long_ones_refused(api: Api) -> None:
    tenant = await api.tenant()
    await _calendar(api, tenant, name="office", dates=[])
    again = await api.client.post("/v1/calendars", json={"name": "office", "dates": []},
                                  headers=tenant.headers)
    assert again.status_code == 409 and "office" in again.json()["error"]["message"]
    long = await api.client.post("/v1/calendars", json={"name": "x" * 101, "dates": []},
                                 headers=tenant.headers)
    assert field_of(long) == (422, "name")


async def test_calendars_are_confined_to_their_tenant(api: Api) -> None:
    tenant, stranger = await api.tenant(), await api.tenant()
    made = await _calendar(api, tenant, name="mine", dates=["2026-12-25"])
    path = f"/v1/calendars/{made['id']}"
    for response in (await api.client.get(path, headers=stranger.headers),
                     await api.client.patch(path, json={"name": "x"}, headers=stranger.headers),
                     await api.client.delete(path, headers=stranger.headers)):
        assert response.status_code == 404, response.text
    listed = await api.client.get("/v1/calendars", headers=stranger.headers)
    assert listed.json()["items"] == []
    taken = await api.client.post("/v1/schedules", headers=stranger.headers, json={
        "name": "s", "cron": "0 9 * * *", "target": {"url": "http://127.0.0.1:9/hook"},
        "exclude_calendars": [made["id"]]})
    assert field_of(taken) == (422, "exclude_calendars"), taken.text


async def test_a_schedule_shows_previews_and_explains_its_calendar(api: Api) -> None:
    tenant = await api.tenant()
    calendar = await _calendar(api, tenant, name="de-holidays",
                               dates=["2027-12-24", "2027-12-31", "2028-01-03"])
    created = await api.create_schedule(
        tenant, cron="0 9 * * FRI", timezone="Europe/Berlin",
        starts_at="2027-12-01T00:00:00Z", exclude_calendars=[calendar["id"]],
        calendar_policy="next_business_day")
    assert created["exclude_calendars"] == [calendar["id"]]
    assert created["calendar_policy"] == "next_business_day"
    sid = created["id"]
    preview = await api.client.get(f"/v1/schedules/{sid}/preview", params={"count": 6},
                                   headers=tenant.headers)
    assert preview.status_code == 200, preview.text
    items = [(i["local"], i["shifted_from"], i["calendar"], i["skipped"])
             for i in preview.json()["items"]]
    # Fri 24 Dec -> Mon 27 Dec; Fri 31 Dec -> Mon 3 Jan is excluded too -> Tue 4 Jan.
    assert items == [
        ("2027-12-03T09:00:00+01:00", None, None, False),
        ("2027-12-10T09:00:00+01:00", None, None, False),
        ("2027-12-17T09:00:00+01:00", None, None, False),
        ("2027-12-27T09:00:00+01:00", "2027-12-24", "de-holidays", False),
        ("2028-01-04T09:00:00+01:00", "2027-12-31", "de-holidays", False),
        ("2028-01-07T09:00:00+01:00", None, None, False),
    ]
    explain = await api.client.get(f"/v1/schedules/{sid}/explain",
                                   params={"at": "2027-12-24T00:00:00Z"}, headers=tenant.headers)
    assert explain.status_code == 200, explain.text
    body = explain.json()
    assert body["occurrence"] == "2027-12-27T08:00:00Z"
    assert "2027-12-24 is in calendar 'de-holidays'" in body["reason"]
    # Skip instead: the preview marks it, explain says so.
    patched = await api.client.patch(f"/v1/schedules/{sid}", json={"calendar_policy": "skip"},
                                     headers=tenant.headers)
    assert patched.status_code == 200 and patched.json()["calendar_policy"] == "skip"
    preview = await api.client.get(f"/v1/schedules/{sid}/preview", params={"count": 5},
                                   headers=tenant.headers)
    assert [(i["local"][:10], i["skipped"]) for i in preview.json()["items"]][3:] == [
        ("2027-12-24", True), ("2027-12-31", True)]
    explain = await api.client.get(f"/v1/schedules/{sid}/explain",
                                   params={"at": "2027-12-24T00:00:00Z"}, headers=tenant.headers)
    assert explain.json()["verdict"] == "skipped"
    assert explain.json()["reason"].startswith(
        "Skipped: 2027-12-24 is in calendar 'de-holidays'")
    bad = await api.client.patch(f"/v1/schedules/{sid}", json={"calendar_policy": "sometimes"},
                                 headers=tenant.headers)
    assert field_of(bad) == (422, "calendar_policy")
    gone = await api.client.patch(f"/v1/schedules/{sid}",
                                  json={"exclude_calendars": [str(uuid.uuid4())]},
                                  headers=tenant.headers)
    assert field_of(gone) == (422, "exclude_calendars")


async def test_a_calendar_in_use_is_409_naming_the_schedule(api: Api) -> None:
    tenant = await api.tenant()
    calendar = await _calendar(api, tenant, name="office", dates=["2030-01-01"])
    created = await api.create_schedule(tenant, name="payroll", cron="0 9 * * *",
                                        exclude_calendars=[calendar["id"]])
    path = f"/v1/calendars/{calendar['id']}"
    refused = await api.client.delete(path, headers=tenant.headers)
    assert refused.status_code == 409
    assert "payroll" in refused.json()["error"]["message"]
    assert created["id"] in refused.json()["error"]["message"]
    cleared = await api.client.patch(f"/v1/schedules/{created['id']}",
                                     json={"exclude_calendars": None}, headers=tenant.headers)
    assert cleared.status_code == 200 and cleared.json()["exclude_calendars"] == []
    assert (await api.client.delete(path, headers=tenant.headers)).status_code == 204
    assert (await api.client.get(path, headers=tenant.headers)).status_code == 404


async def test_an_edit_replans_and_stats_count_calendar_skips(api: Api) -> None:
    tenant = await api.tenant()
    calendar = await _calendar(api, tenant, name="office", dates=["2030-01-01"])
    created = await api.create_schedule(tenant, cron="* * * * *", timezone="UTC",
                                        exclude_calendars=[calendar["id"]])
    sid = uuid.UUID(created["id"])
    store = PostgresPlannerStore(api.pool)

    async def plan() -> None:
        await store.plan_due(limit=10, lookahead_seconds=150,
                             decide=lambda s, n, w: decide(s, n, w, 150))

    await plan()
    ahead = await api.pool.fetch("SELECT scheduled_for FROM job_run WHERE schedule_id = $1 "
                                 "AND status = 'pending' ORDER BY 1", sid)
    assert len(ahead) >= 2
    days = sorted({r["scheduled_for"].date() for r in ahead})
    patched = await api.client.patch(
        f"/v1/calendars/{calendar['id']}", headers=tenant.headers,
        json={"dates": [d.isoformat() for d in days]})
    assert patched.status_code == 200, patched.text
    assert patched.json()["replanned_schedules"] == 1
    assert patched.json()["holidays"] is None
    left = await api.pool.fetchval("SELECT count(*) FROM job_run WHERE schedule_id = $1 AND "
                                   "status = 'pending' AND scheduled_for > now()", sid)
    assert left == 0
    await plan()
    rows = await api.pool.fetch("SELECT status, skip_reason, last_error FROM job_run "
                                "WHERE schedule_id = $1 AND scheduled_for > now()", sid)
    assert rows and {(r["status"], r["skip_reason"]) for r in rows} == {("skipped", "calendar")}
    # Stats count what is already in the past; make one of them past.
    await api.pool.execute("UPDATE job_run SET scheduled_for = scheduled_for - interval '1 day'"
                           " WHERE schedule_id = $1 AND status = 'skipped'", sid)
    stats = await api.client.get(f"/v1/schedules/{sid}/stats", params={"window": "7d"},
                                 headers=tenant.headers)
    assert stats.status_code == 200, stats.text
    assert stats.json()["skipped"]["calendar"] == len(rows)
    audit = await api.client.get("/v1/audit", params={"object_id": calendar["id"]},
                                 headers=tenant.headers)
    assert audit.status_code == 200, audit.text
    assert [e["action"] for e in audit.json()["items"]] == ["calendar.update", "calendar.create"]
    assert audit.json()["items"][0]["changes"]["dates"][0] == ["2030-01-01"]


async def test_a_backward_shift_out_of_the_window_writes_nothing_ahead(api: Api) -> None:
    tenant = await api.tenant()
    now: datetime = await api.pool.fetchval("SELECT now()")
    today = now.astimezone(UTC).date()
    calendar = await _calendar(api, tenant, name="today",
                               dates=[today.isoformat(), (today + timedelta(days=1)).isoformat()])
    created = await api.create_schedule(tenant, cron="*/10 * * * * *", timezone="UTC",
                                        exclude_calendars=[calendar["id"]],
                                        calendar_policy="previous_business_day")
    # Every occurrence of today and tomorrow moves back before today: the next instant
    # that fires is midnight after tomorrow, and the planner writes nothing before it.
    after_tomorrow = datetime.combine(today + timedelta(days=2), datetime.min.time(), UTC)
    assert created["next_fire_at"] == iso(after_tomorrow)
    store = PostgresPlannerStore(api.pool)
    await store.plan_due(limit=10, lookahead_seconds=30,
                         decide=lambda s, n, w: decide(s, n, w, 30))
    written = await api.pool.fetchval("SELECT count(*) FROM job_run WHERE schedule_id = $1",
                                      uuid.UUID(created["id"]))
    assert written == 0


async def test_schedules_as_code_carry_calendars(api: Api) -> None:
    tenant, stranger = await api.tenant(), await api.tenant()
    calendar = await _calendar(api, tenant, name="office", dates=["2030-01-01"])
    theirs = await _calendar(api, stranger, name="theirs", dates=["2030-01-01"])
    body = {"name": "coded", "cron": "0 9 * * *", "target": {"url": "http://127.0.0.1:9/h"},
            "exclude_calendars": [calendar["id"]], "calendar_policy": "previous_business_day"}
    put = await api.client.put("/v1/schedules/by-key/coded", json=body, headers=tenant.headers)
    assert put.status_code in (200, 201), put.text
    assert (put.json()["exclude_calendars"], put.json()["calendar_policy"]) == (
        [calendar["id"]], "previous_business_day")
    again = await api.client.put("/v1/schedules/by-key/coded", json=body, headers=tenant.headers)
    assert again.status_code == 200 and again.json()["version"] == put.json()["version"]
    applied = await api.client.post("/v1/schedules/apply", headers=tenant.headers, json={
        "schedules": [{**body, "key": "coded", "exclude_calendars": [theirs["id"]]}]})
    assert field_of(applied) == (422, "exclude_calendars"), applied.text
