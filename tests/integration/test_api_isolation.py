"""Tenant isolation: every /v1 route, called with tenant B's token and tenant A's ids,
answers 404 or an empty page and leaves A's objects untouched; without a valid token
every route answers 401. The route table is checked against /openapi.json, so a new
route cannot be added without joining this walk."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest

from tests.support.api import Api, Tenant, api_fixture, insert_runs  # noqa: F401 - fixture


@dataclass(frozen=True)
class Call:
    method: str
    path: str  # "{schedule}" / "{run}" are filled with A's ids
    json: Any = None
    params: dict[str, str] | None = None
    # What B may see: "404" (not found), "empty" (an empty page), "own" (B's own new object),
    # "none" (a bulk action that found nothing of B's to act on), "mine" (B's own objects
    # only: a 200 or 201 showing nothing of A's), "nothing to prune" (an apply pruning A's
    # managed_by label found nothing of B's), "refused" (422 naming the field that holds A's
    # id), "calendar" (B's own new calendar).
    expect: str = "404"


CALLS = [
    Call("GET", "/v1/schedules", expect="empty"),
    Call("GET", "/v1/schedules/{schedule}"),
    Call("PATCH", "/v1/schedules/{schedule}", json={"name": "stolen", "cron": "* * * * *"}),
    Call("DELETE", "/v1/schedules/{schedule}"),
    Call("POST", "/v1/schedules/{schedule}/pause"),
    Call("POST", "/v1/schedules/{schedule}/resume"),
    Call("POST", "/v1/schedules/{schedule}/trigger"),
    Call("GET", "/v1/schedules/{schedule}/preview", params={"count": "5"}),
    Call("POST", "/v1/schedules/{schedule}/rotate-secret"),
    Call("GET", "/v1/runs", expect="empty"),
    Call("GET", "/v1/runs", params={"schedule_id": "{schedule}"}, expect="empty"),
    Call("GET", "/v1/runs", params={"schedule_id": "{schedule}", "status": "succeeded"},
         expect="empty"),
    Call("GET", "/v1/runs", params={"status": "succeeded"}, expect="empty"),
    Call("GET", "/v1/runs", params={"since": "2000-01-01T00:00:00Z",
                                    "until": "2100-01-01T00:00:00Z"}, expect="empty"),
    Call("GET", "/v1/runs", params={"cursor": "{run_cursor}"}, expect="empty"),
    Call("GET", "/v1/schedules", params={"cursor": "{schedule_cursor}"}, expect="empty"),
    Call("GET", "/v1/runs/{run}"),
    Call("POST", "/v1/schedules/{schedule}/backfill",
         json={"start": "2000-01-01T00:00:00Z", "end": "2000-01-02T00:00:00Z"}),
    Call("POST", "/v1/runs/{run}/replay"),
    Call("POST", "/v1/runs/replay", json={"status": "failed"}, expect="none"),
    Call("GET", "/v1/schedules/{schedule}/stats", params={"window": "30d"}),
    Call("GET", "/v1/schedules/{schedule}/explain", params={"at": "2027-01-01T00:00:00Z"}),
    Call("GET", "/v1/alerts"),  # B has set no destination; A's is not B's
    Call("GET", "/v1/alerts/events", expect="empty"),
    Call("PUT", "/v1/alerts", json={"url": "http://127.0.0.1:9/b-alerts"}, expect="own"),
    Call("GET", "/v1/flow-control", expect="empty"),
    Call("GET", "/v1/flow-control", params={"key": "alpha-key"}, expect="empty"),
    Call("GET", "/v1/schedules/{schedule}/revisions"),
    Call("POST", "/v1/schedules/{schedule}/revisions/1/restore"),
    Call("GET", "/v1/tokens", expect="mine"),
    Call("DELETE", "/v1/tokens/{token}"),
    Call("POST", "/v1/tokens", json={"name": "b-reader", "scope": "read"}, expect="mine"),
    Call("GET", "/v1/audit", expect="mine"),
    Call("GET", "/v1/audit", params={"object_id": "{schedule}"}, expect="empty"),
    Call("GET", "/v1/schedules/by-key/{key}"),
    Call("DELETE", "/v1/schedules/by-key/{key}"),
    Call("POST", "/v1/schedules/apply",
         json={"schedules": [], "managed_by": "alpha-tool", "prune": True},
         expect="nothing to prune"),
    Call("GET", "/v1/calendars", expect="empty"),
    Call("GET", "/v1/calendars/{calendar}"),
    Call("PATCH", "/v1/calendars/{calendar}", json={"dates": ["2027-01-01"]}),
    Call("DELETE", "/v1/calendars/{calendar}"),
    # A schedule of B's cannot exclude A's calendar (nor learn whether it exists).
    Call("POST", "/v1/schedules", json={"name": "b", "cron": "@daily",
                                        "target": {"url": "http://127.0.0.1:9/"},
                                        "exclude_calendars": ["{calendar}"]},
         expect="refused"),
    # Last, so the listings above still expect B to have nothing at all.
    Call("POST", "/v1/calendars", json={"name": "beta-days", "dates": ["2027-01-01"]},
         expect="calendar"),
    Call("PUT", "/v1/schedules/by-key/{key}",
         json={"name": "b", "cron": "@daily", "target": {"url": "http://127.0.0.1:9/"}},
         expect="own"),
    Call("POST", "/v1/schedules", json={"name": "b", "cron": "@daily",
                                        "target": {"url": "http://127.0.0.1:9/"}}, expect="own"),
]


def _fill(text: str, ids: dict[str, str]) -> str:
    for name, value in ids.items():
        text = text.replace("{" + name + "}", value)
    return text


def _fill_json(value: Any, ids: dict[str, str]) -> Any:
    if isinstance(value, str):
        return _fill(value, ids)
    if isinstance(value, list):
        return [_fill_json(item, ids) for item in value]
    if isinstance(value, dict):
        return {key: _fill_json(item, ids) for key, item in value.items()}
    return value


async def _send(api: Api, call: Call, ids: dict[str, str], headers: dict[str, str]) -> Any:
    params = {k: _fill(v, ids) for k, v in (call.params or {}).items()}
    return await api.client.request(call.method, _fill(call.path, ids),
                                    json=_fill_json(call.json, ids),
                                    params=params or None, headers=headers)


async def _tenant_a_state(api: Api, tenant: Tenant) -> list[Any]:
    schedules = await api.pool.fetch(
        "SELECT id, name, cron, status, next_fire_at, signing_secret, previous_signing_secret, "
        "updated_at, key, managed_by FROM schedule WHERE tenant_id = $1 ORDER BY id", tenant.id)
    runs = await api.pool.fetch(
        "SELECT id, status, updated_at FROM job_run WHERE tenant_id = $1 ORDER BY id", tenant.id)
    alerts = await api.pool.fetch(
        "SELECT url, signing_secret, updated_at::text FROM tenant_alert_destination "
        "WHERE tenant_id = $1 UNION ALL SELECT type, status, created_at::text FROM alert_event "
        "WHERE tenant_id = $1", tenant.id)
    flows = await api.pool.fetch(
        "SELECT key, max_concurrency, in_flight, updated_at FROM flow_control "
        "WHERE tenant_id = $1 ORDER BY key", tenant.id)
    tokens = await api.pool.fetch(
        "SELECT id, scope, revoked_at FROM api_token WHERE tenant_id = $1 ORDER BY id", tenant.id)
    calendars = await api.pool.fetch(
        "SELECT id, name, dates, updated_at FROM calendar WHERE tenant_id = $1 ORDER BY id",
        tenant.id)
    return ([tuple(r) for r in tokens] + [tuple(r) for r in schedules] + [tuple(r) for r in runs]
            + [tuple(r) for r in alerts] + [tuple(r) for r in flows]
            + [tuple(r) for r in calendars])


async def _tenant_a_private_values(api: Api, tenant: Tenant) -> set[str]:
    """Every id and secret of A, as they would appear in a response body."""
    rows = await api.pool.fetch(
        "SELECT id::text AS v FROM schedule WHERE tenant_id = $1 "
        "UNION ALL SELECT signing_secret FROM schedule WHERE tenant_id = $1 "
        "UNION ALL SELECT id::text FROM job_run WHERE tenant_id = $1 "
        "UNION ALL SELECT id::text FROM api_token WHERE tenant_id = $1 "
        "UNION ALL SELECT id::text FROM calendar WHERE tenant_id = $1", tenant.id)
    return {r["v"] for r in rows} | {str(tenant.id), "alpha-one", "alpha-two", "alpha-key",
                                     "alpha-days"}


@pytest.fixture
async def tenant_a(api: Api) -> tuple[Tenant, dict[str, str]]:
    """Tenant A with two schedules, their runs, and cursors taken from A's own pages."""
    a = await api.tenant("a")
    first = await api.create_schedule(a, name="alpha-one", key="alpha-sched",
                                      managed_by="alpha-tool",
                                      flow_control={"key": "alpha-key", "max_concurrency": 2})
    await api.create_schedule(a, name="alpha-two")
    newest = await api.pool.fetchval("SELECT date_trunc('minute', now())")
    # Failed ones too: the bulk replay must find none of them with B's token.
    await insert_runs(api.pool, a.id, uuid.UUID(first["id"]), 5, newest=newest,
                      step=timedelta(minutes=1), statuses=["failed", "succeeded"])
    runs = (await api.client.get("/v1/runs", params={"limit": 2}, headers=a.headers)).json()
    schedules = (await api.client.get("/v1/schedules", params={"limit": 1},
                                      headers=a.headers)).json()
    assert runs["next_cursor"] and schedules["next_cursor"]
    # A's alert destination and one alert event: B must see neither.
    assert (await api.client.put("/v1/alerts", json={"url": "http://127.0.0.1:9/a-alerts"},
                                 headers=a.headers)).status_code == 200
    await api.pool.execute(
        "INSERT INTO alert_event (id, tenant_id, schedule_id, schedule_name, type) "
        "VALUES (gen_random_uuid(), $1, $2, 'alpha-one', 'schedule.failing')",
        a.id, uuid.UUID(first["id"]))
    token = await api.pool.fetchval("SELECT id::text FROM api_token WHERE tenant_id = $1", a.id)
    made = await api.client.post("/v1/calendars", headers=a.headers, json={
        "name": "alpha-days", "dates": ["2026-12-24", "2026-12-31"]})
    assert made.status_code == 201, made.text
    return a, {"schedule": first["id"], "run": runs["items"][0]["id"], "token": token,
               "run_cursor": runs["next_cursor"], "schedule_cursor": schedules["next_cursor"],
               "key": "alpha-sched", "calendar": made.json()["id"]}


async def test_the_walk_covers_every_tenant_route(api: Api) -> None:
    spec = (await api.client.get("/openapi.json")).json()
    routes = {(method.upper(), path) for path, operations in spec["paths"].items()
              if path.startswith("/v1") for method in operations}
    assert len(routes) == 36
    walked = {(c.method, c.path.replace("{schedule}", "{id}").replace("{run}", "{id}")
               .replace("{token}", "{id}").replace("{calendar}", "{id}").replace("/revisions/1/", "/revisions/{version}/"))
              for c in CALLS}
    assert walked == routes


async def test_another_tenants_objects_answer_404_or_empty_and_stay_untouched(
    api: Api, tenant_a: tuple[Tenant, dict[str, str]]
) -> None:
    a, ids = tenant_a
    b = await api.tenant("b")
    before = await _tenant_a_state(api, a)
    private = await _tenant_a_private_values(api, a)
    leaks: list[str] = []
    for call in CALLS:
        response = await _send(api, call, ids, b.headers)
        text = response.text
        asked = {ids[name] for name in ids  # what B sent itself may come back
                 if "{" + name + "}" in f"{call.path}{call.params}{call.json}"}
        shown = {value for value in private - asked if value in text}
        if shown:
            leaks.append(f"{call}: shows A's {sorted(shown)}: {text}")
        if call.expect == "404":
            twin = await _send(api, call, {**ids, "schedule": str(uuid.uuid4()),
                                           "run": str(uuid.uuid4()),
                                           "token": str(uuid.uuid4()),
                                           "calendar": str(uuid.uuid4())}, b.headers)
            ok = (response.status_code == 404 and response.json()["error"]["code"] == "not_found"
                  and twin.status_code == 404)
        elif call.expect == "empty":  # a page with no items (and no cursor, if it has one)
            body = response.json()
            ok = (response.status_code == 200 and body["items"] == []
                  and body.get("next_cursor") is None and set(body) <= {"items", "next_cursor"})
        elif call.expect == "refused":  # the same answer as for an id nobody has
            nobodys = str(uuid.uuid4())
            twin = await _send(api, call, {**ids, "calendar": nobodys}, b.headers)
            errors = [r.json()["error"] for r in (response, twin)]
            ok = (response.status_code == twin.status_code == 422
                  and errors[0]["field"] == errors[1]["field"] == "exclude_calendars"
                  and errors[0]["message"].replace(ids["calendar"], "?")
                  == errors[1]["message"].replace(nobodys, "?"))
        elif call.expect == "calendar":  # B's own
            ok = response.status_code == 201 and response.json()["id"] != ids["calendar"]
        elif call.expect == "mine":
            ok = response.status_code in (200, 201)
        elif call.expect == "nothing to prune":
            ok = response.status_code == 200 and response.json() == {
                "created": [], "updated": [], "deleted": [], "unchanged": 0, "dry_run": False,
                "signing_secrets": {}}
        elif call.expect == "none":
            ok = response.status_code == 202 and response.json() == {"replayed": 0, "runs": []}
        elif call.path == "/v1/alerts":  # B's own destination, A's untouched
            ok = response.status_code == 200 and response.json()["url"].endswith("/b-alerts")
        else:
            ok = response.status_code == 201 and response.json()["tenant_id"] == str(b.id)
        if not ok:
            leaks.append(f"{call}: {response.status_code} {text}")
    assert not leaks, "\n".join(leaks)
    assert await _tenant_a_state(api, a) == before
    # A still sees everything of its own; B sees only the two schedules it created (by POST, and by
    # PUT to A's key, which made B's own schedule under that key).
    assert len((await api.client.get("/v1/schedules", headers=a.headers)).json()["items"]) == 2
    own = (await api.client.get("/v1/schedules", headers=b.headers)).json()["items"]
    assert sorted(str(s["key"]) for s in own) == ["None", "alpha-sched"]


async def test_the_404_for_a_foreign_id_is_the_404_for_a_missing_one(
    api: Api, tenant_a: tuple[Tenant, dict[str, str]]
) -> None:
    """No existence oracle: the answer does not depend on whether the id exists elsewhere."""
    _, ids = tenant_a
    b = await api.tenant("b")
    for kind, path in (("schedule", "/v1/schedules/{}"), ("run", "/v1/runs/{}")):
        missing = str(uuid.uuid4())
        foreign = await api.client.get(path.format(ids[kind]), headers=b.headers)
        absent = await api.client.get(path.format(missing), headers=b.headers)
        assert foreign.status_code == absent.status_code == 404
        assert foreign.json()["error"]["message"].replace(ids[kind], "X") == \
            absent.json()["error"]["message"].replace(missing, "X")


async def test_every_route_answers_401_without_a_valid_token(
    api: Api, tenant_a: tuple[Tenant, dict[str, str]]
) -> None:
    a, ids = tenant_a
    revoked = await api.tenant("revoked")
    await api.pool.execute("UPDATE api_token SET revoked_at = now() WHERE tenant_id = $1",
                           revoked.id)
    bad_headers: list[dict[str, str]] = [
        {}, {"Authorization": "Bearer"}, {"Authorization": "Bearer cwt_not-a-real-token"},
        {"Authorization": f"Basic {a.token}"}, {"Authorization": a.token},
        {"Authorization": "Bearer " + "x" * 5000}, revoked.headers,
    ]
    before = await _tenant_a_state(api, a)
    wrong: list[str] = []
    for call in CALLS:
        for headers in bad_headers:
            response = await _send(api, call, ids, headers)
            error = response.json().get("error", {}) if response.content else {}
            if (response.status_code != 401 or error.get("code") != "unauthorized"
                    or "bearer" not in response.headers.get("www-authenticate", "").lower()):
                wrong.append(f"{call.method} {call.path} {list(headers.values())[:1]}: "
                             f"{response.status_code} {response.text[:200]}")
    assert not wrong, "\n".join(wrong)
    assert await _tenant_a_state(api, a) == before
    # Operations routes stay open.
    assert (await api.client.get("/healthz")).status_code == 200


# Statements that legitimately do not filter on tenant_id, and why.
NOT_TENANT_SCOPED = {
    "database_now": "reads the clock only",
    "job_run_manual_instant": "reads the clock only",
    "tenant_limits_now": "the tenant row itself, by id = $1",
    "tenant_lock_live_count": "the tenant row itself, by t.id = $1",
    "schedule_insert": "writes the authenticated tenant id ($2)",
    "job_run_insert_manual": "writes the authenticated tenant id ($2) after schedule_lock_live",
    "tenant_alert_destination_upsert": "writes the authenticated tenant id ($1)",
    "job_run_stats_values": "one schedule ($1), read after schedule_get found it the tenant's",
    "job_run_outcome_streak": "one schedule ($1), read after schedule_get found it the tenant's",
    "job_run_stats_skipped": "one schedule ($1), read after schedule_get found it the tenant's",
    "job_run_partition_bounds": "reads the partition catalog only",
}


def test_every_api_statement_is_confined_to_the_callers_tenant() -> None:
    """The static half of the isolation guarantee (ADR 0007): each API query names the
    tenant parameter, so a query added without it fails here before it can leak."""
    import inspect
    import re

    from cronwire.adapters.postgres import (
        alert_store,
        run_history,
        schedule_apply,
        schedule_rows,
        schedule_stats,
        schedule_store,
        schedule_writes,
    )
    from cronwire.adapters.postgres.sql import queries

    # The API's statements are the ones its two stores name (queries are one file per
    # table, so a file holds non-API statements too): every quoted query name in them.
    named = queries()
    statements = {word for module in (schedule_store, schedule_rows, schedule_apply,
                                      schedule_writes, run_history, alert_store, schedule_stats)
                  for word in re.findall(r'"([a-z_]+)"', inspect.getsource(module))
                  if word in named}
    assert {"schedule_insert", "job_run_list_for_tenant", "job_run_get"} <= statements
    unscoped = sorted(name for name in statements - set(NOT_TENANT_SCOPED)
                      if "tenant_id = $1" not in named[name])
    assert not unscoped, f"API queries without 'tenant_id = $1': {unscoped}"
    assert set(NOT_TENANT_SCOPED) <= statements  # no stale exemptions
