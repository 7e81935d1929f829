"""RFC 5545 rule schedules through the API on real Postgres (CONTRACT.md, "Calendars"):
stored normalised, previewed with the DST rule, refused with a 422 naming `rrule`, bound
by the tenant's minimum interval, switched to and from cron, backfilled, explained, and
planned by the real planner statement into one run per occurrence."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from cronwire.adapters.postgres.planner_store import PostgresPlannerStore
from cronwire.domain.cron import occurrences_between
from cronwire.domain.planning import decide
from tests.support.api import Api, api_fixture, schedule_body  # noqa: F401 - fixture

WEEKDAYS_AT_NINE = "DTSTART:20270301T090000\nRRULE:FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR"


def iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


async def error_of(response: Any) -> tuple[int, str | None]:
    error = response.json()["error"]
    return response.status_code, error["field"]


async def test_a_rule_is_stored_normalised_and_previewed_across_dst(api: Api) -> None:
    tenant = await api.tenant()
    rule = ("DTSTART:20270326T013000Z\nRRULE:FREQ=DAILY;BYHOUR=2;BYMINUTE=30;UNTIL=20270330T"
            "000000Z")
    created = await api.create_schedule(tenant, cron=None, rrule=rule)
    # 01:30Z is 02:30 CET; UNTIL 00:00Z is 02:00 CEST; both stored as Berlin wall times
    assert created["cron"] is None and created["at"] is None
    assert created["rrule"] == ("DTSTART:20270326T023000\nRRULE:FREQ=DAILY;BYHOUR=2;"
                                "BYMINUTE=30;UNTIL=20270330T020000")
    preview = await api.client.get(f"/v1/schedules/{created['id']}/preview",
                                   params={"count": 10}, headers=tenant.headers)
    assert preview.status_code == 200, preview.text
    # 28 Mar 2027: 02:30 does not exist in Berlin; the wall-clock rule fires at 03:00 CEST
    assert [(i["utc"], i["local"]) for i in preview.json()["items"]] == [
        ("2027-03-26T01:30:00Z", "2027-03-26T02:30:00+01:00"),
        ("2027-03-27T01:30:00Z", "2027-03-27T02:30:00+01:00"),
        ("2027-03-28T01:00:00Z", "2027-03-28T03:00:00+02:00"),
        ("2027-03-29T00:30:00Z", "2027-03-29T02:30:00+02:00"),
    ]
    got = await api.client.get(f"/v1/schedules/{created['id']}", headers=tenant.headers)
    assert got.json()["rrule"] == created["rrule"]
    assert created["next_fire_at"] == "2027-03-26T01:30:00Z"


@pytest.mark.parametrize(("overrides", "field"), [
    ({"rrule": WEEKDAYS_AT_NINE}, "rrule"),  # with the body's cron
    ({"cron": None, "rrule": WEEKDAYS_AT_NINE, "at": "2030-01-01T00:00:00Z"}, "at"),
    ({"cron": None, "rrule": "RRULE:FREQ=SOMETIMES"}, "rrule"),
    ({"cron": None, "rrule": "RRULE:FREQ=DAILY\nRRULE:FREQ=WEEKLY"}, "rrule"),
    ({"cron": None, "rrule": "RRULE:FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=30"}, "rrule"),
    ({"cron": None, "rrule": "DTSTART:20200101T000000\nRRULE:FREQ=DAILY;COUNT=3"}, "rrule"),
    ({"cron": None, "rrule": "DTSTART;TZID=Asia/Tokyo:20270101T000000\nRRULE:FREQ=DAILY"},
     "rrule"),
    ({"cron": "DTSTART:20270101T000000\nRRULE:FREQ=DAILY"}, "cron"),
    ({"cron": None, "rrule": "RRULE:FREQ=DAILY;" + "BYHOUR=1;" * 1200}, "rrule"),
])
async def test_bad_rules_are_422_naming_the_field(
    api: Api, overrides: dict[str, Any], field: str
) -> None:
    tenant = await api.tenant()
    response = await api.client.post("/v1/schedules", json=schedule_body(**overrides),
                                     headers=tenant.headers)
    assert await error_of(response) == (422, field), response.text
    assert await api.pool.fetchval("SELECT count(*) FROM schedule") == 0


async def test_the_minimum_interval_applies_to_rules(api: Api) -> None:
    tenant = await api.tenant()
    await api.pool.execute("UPDATE tenant SET min_interval_seconds = 60 WHERE id = $1",
                           tenant.id)
    dense = await api.client.post("/v1/schedules", headers=tenant.headers, json=schedule_body(
        cron=None, rrule="RRULE:FREQ=SECONDLY;INTERVAL=30"))
    assert dense.status_code == 422, dense.text
    assert dense.json()["error"]["limit"] == "min_interval_seconds"
    assert dense.json()["error"]["field"] == "rrule"
    ok = await api.client.post("/v1/schedules", headers=tenant.headers, json=schedule_body(
        cron=None, rrule="RRULE:FREQ=MINUTELY;INTERVAL=2"))
    assert ok.status_code == 201, ok.text


async def test_a_patch_switches_between_cron_and_a_rule(api: Api) -> None:
    tenant = await api.tenant()
    created = await api.create_schedule(tenant)
    path = f"/v1/schedules/{created['id']}"
    both = await api.client.patch(path, headers=tenant.headers, json={"rrule": WEEKDAYS_AT_NINE})
    assert await error_of(both) == (422, "rrule")
    to_rule = await api.client.patch(path, headers=tenant.headers,
                                     json={"rrule": WEEKDAYS_AT_NINE, "cron": None})
    assert to_rule.status_code == 200, to_rule.text
    body = to_rule.json()
    assert (body["cron"], body["rrule"]) == (None, WEEKDAYS_AT_NINE)
    assert body["next_fire_at"] == "2027-03-01T08:00:00Z"  # Monday 09:00 CET
    back = await api.client.patch(path, headers=tenant.headers,
                                  json={"cron": "0 4 * * *", "rrule": None})
    assert back.status_code == 200 and back.json()["rrule"] is None


async def test_backfill_and_explain_walk_the_rule(api: Api) -> None:
    tenant = await api.tenant()
    now: datetime = await api.pool.fetchval("SELECT now()")
    day = (now - timedelta(days=10)).astimezone(UTC).replace(hour=0, minute=0, second=0,
                                                             microsecond=0)
    rule = f"DTSTART:{day:%Y%m%dT%H%M%S}\nRRULE:FREQ=HOURLY;INTERVAL=6\nEXDATE:" \
           f"{day + timedelta(hours=6):%Y%m%dT%H%M%S}"
    created = await api.create_schedule(tenant, cron=None, rrule=rule, timezone="UTC")
    backfill = await api.client.post(
        f"/v1/schedules/{created['id']}/backfill", headers=tenant.headers,
        json={"start": iso(day), "end": iso(day + timedelta(days=1)), "dry_run": True})
    assert backfill.status_code == 200, backfill.text
    assert backfill.json()["first"] == [iso(day), iso(day + timedelta(hours=12)),
                                        iso(day + timedelta(hours=18))]  # 06:00 excluded
    explain = await api.client.get(f"/v1/schedules/{created['id']}/explain",
                                   params={"at": iso(day + timedelta(hours=5))},
                                   headers=tenant.headers)
    assert explain.status_code == 200, explain.text
    assert explain.json()["occurrence"] == iso(day + timedelta(hours=12))


async def test_the_planner_writes_one_run_per_occurrence_of_a_rule(api: Api) -> None:
    tenant = await api.tenant()
    created = await api.create_schedule(
        tenant, cron=None, timezone="UTC",
        rrule="RRULE:FREQ=SECONDLY;INTERVAL=2;BYSECOND=0,10,20,30,40,50")
    sid = uuid.UUID(created["id"])
    store = PostgresPlannerStore(api.pool)
    start: datetime = await api.pool.fetchval("SELECT next_fire_at FROM schedule WHERE id = $1",
                                              sid)
    await api.pool.execute("UPDATE schedule SET next_fire_at = now() - interval '30 seconds' "
                           "WHERE id = $1", sid)
    cursor: datetime = await api.pool.fetchval("SELECT next_fire_at FROM schedule WHERE id = $1",
                                               sid)
    for _ in range(3):  # a second pass plans nothing again
        await store.plan_due(limit=10, lookahead_seconds=30,
                             decide=lambda s, n, w: decide(s, n, w, 30))
    rows = await api.pool.fetch("SELECT scheduled_for FROM job_run WHERE schedule_id = $1 "
                                "ORDER BY scheduled_for", sid)
    planned = [r["scheduled_for"] for r in rows]
    assert planned, "the planner wrote the rule's runs"
    assert start is not None
    want = occurrences_between(created["rrule"], "UTC", cursor - timedelta(microseconds=1),
                               planned[-1], 1000)
    assert planned == want
    assert all(t.second % 10 == 0 for t in planned)
    assert len(set(planned)) == len(planned)
