"""Flow control through the API on real Postgres (CONTRACT.md, "Flow control"): the
schedule field and its 422s, the key's limits as the strictest of its schedules', the
merge of a PATCH, and GET /v1/flow-control."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.support.api import Api, api_fixture, schedule_body  # noqa: F401 - fixture

ORIGIN = "http://127.0.0.1:9"  # schedule_body's target, as a key (default port written out)


async def _keys(api: Api, tenant: Any) -> list[dict[str, Any]]:
    response = await api.client.get("/v1/flow-control", headers=tenant.headers)
    assert response.status_code == 200, response.text
    items: list[dict[str, Any]] = response.json()["items"]
    return items


@pytest.mark.parametrize(("flow", "field"), [
    ({"max_concurrency": 0}, "flow_control.max_concurrency"),
    ({"max_concurrency": 10_001}, "flow_control.max_concurrency"),
    ({"max_concurrency": "5"}, "flow_control.max_concurrency"),
    ({"rate_per_second": 0}, "flow_control.rate_per_second"),
    ({"rate_per_second": -1.5}, "flow_control.rate_per_second"),
    # ADR 0055: the rate whose token bucket underflowed inside every tenant's claim.
    ({"rate_per_second": 5e-324}, "flow_control.rate_per_second"),
    ({"rate_per_second": 0.000009}, "flow_control.rate_per_second"),
    ({"burst": 3}, "flow_control.burst"),  # without a rate
    ({"rate_per_second": 5, "burst": 0}, "flow_control.burst"),
    ({"key": "  "}, "flow_control.key"),
    ({"key": "a\nb"}, "flow_control.key"),
    ({"key": "k" * 201}, "flow_control.key"),
    ({"parallelism": 3}, "flow_control.parallelism"),
])
async def test_a_bad_flow_control_is_a_422_naming_the_member(
        api: Api, flow: dict[str, Any], field: str) -> None:
    tenant = await api.tenant()
    response = await api.client.post("/v1/schedules", headers=tenant.headers,
                                     json={**schedule_body(), "flow_control": flow})
    assert response.status_code == 422, response.text
    assert response.json()["error"]["field"] == field


async def test_the_key_defaults_to_the_origin_and_takes_the_strictest_limits(api: Api) -> None:
    tenant, other = await api.tenant(), await api.tenant("other")
    plain = await api.create_schedule(tenant)
    assert plain["flow_control"] is None
    first = await api.create_schedule(tenant, flow_control={"max_concurrency": 8})
    assert first["flow_control"] == {"key": ORIGIN, "max_concurrency": 8,
                                     "rate_per_second": None, "burst": None}
    await api.create_schedule(tenant, flow_control={"key": ORIGIN, "max_concurrency": 3,
                                                    "rate_per_second": 20})
    await api.create_schedule(other, flow_control={"max_concurrency": 1})  # its own key
    [key] = await _keys(api, tenant)
    assert (key["key"], key["max_concurrency"], key["rate_per_second"], key["in_flight"],
            key["waiting"], key["held_until"]) == (ORIGIN, 3, 20.0, 0, 0, None)
    # A PATCH merges member by member; null removes a limit, and the whole object.
    patched = await api.client.patch(f"/v1/schedules/{first['id']}", headers=tenant.headers,
                                     json={"flow_control": {"key": "billing"}})
    assert patched.status_code == 200, patched.text
    assert patched.json()["flow_control"] == {"key": "billing", "max_concurrency": 8,
                                              "rate_per_second": None, "burst": None}
    keys = {k["key"]: k["max_concurrency"] for k in await _keys(api, tenant)}
    assert keys == {ORIGIN: 3, "billing": 8}
    gone = await api.client.patch(f"/v1/schedules/{first['id']}", headers=tenant.headers,
                                  json={"flow_control": None})
    assert gone.json()["flow_control"] is None
    assert {k["key"]: k["max_concurrency"] for k in await _keys(api, tenant)} == {
        ORIGIN: 3, "billing": None}


async def test_a_deleted_schedule_no_longer_limits_its_key(api: Api) -> None:
    tenant = await api.tenant()
    loose = await api.create_schedule(tenant, flow_control={"max_concurrency": 9})
    strict = await api.create_schedule(tenant, flow_control={"max_concurrency": 2})
    assert [k["max_concurrency"] for k in await _keys(api, tenant)] == [2]
    deleted = await api.client.delete(f"/v1/schedules/{strict['id']}", headers=tenant.headers)
    assert deleted.status_code == 204
    assert [k["max_concurrency"] for k in await _keys(api, tenant)] == [9]
    assert loose["flow_control"]["key"] == ORIGIN


async def test_one_key_is_asked_for_by_name(api: Api) -> None:
    tenant = await api.tenant()
    await api.create_schedule(tenant, flow_control={"key": "billing", "max_concurrency": 4})
    await api.create_schedule(tenant, flow_control={"key": "search", "rate_per_second": 2})
    response = await api.client.get("/v1/flow-control", params={"key": "search"},
                                    headers=tenant.headers)
    assert response.status_code == 200, response.text
    assert [(k["key"], k["rate_per_second"]) for k in response.json()["items"]] == [
        ("search", 2.0)]
    unknown = await api.client.get("/v1/flow-control", params={"key": "nope"},
                                   headers=tenant.headers)
    assert unknown.json() == {"items": []}
    blank = await api.client.get("/v1/flow-control", params={"key": ""},
                                 headers=tenant.headers)
    assert blank.status_code == 422 and blank.json()["error"]["field"] == "key"


async def test_a_nul_in_the_key_asked_for_is_a_422_not_a_database_error(api: Api) -> None:
    # It reached the database as the lookup and answered 503, "the database is unavailable".
    tenant = await api.tenant()
    response = await api.client.get("/v1/flow-control", params={"key": "a\x00b"},
                                    headers=tenant.headers)
    assert response.status_code == 422, response.text
    assert response.json()["error"]["field"] == "key"


@pytest.mark.parametrize("bad", ["a\x00b", "a\ud800b"], ids=["nul", "lone-surrogate"])
async def test_a_key_postgres_cannot_store_is_a_422_naming_it(api: Api, bad: str) -> None:
    # A lone surrogate passed the key's checks and failed to encode on its way to the
    # database, answered 503 as if it were down; sent as a JSON escape, as a client may.
    tenant = await api.tenant()
    headers = {**tenant.headers, "content-type": "application/json"}
    created = await api.client.post("/v1/schedules", headers=headers, content=json.dumps(
        {**schedule_body(), "flow_control": {"key": bad}}).encode())
    assert created.status_code == 422, created.text
    assert created.json()["error"]["field"] == "flow_control.key"
    schedule = await api.create_schedule(tenant)
    patched = await api.client.patch(f"/v1/schedules/{schedule['id']}", headers=headers,
                                     content=json.dumps({"flow_control": {"key": bad}}).encode())
    assert patched.status_code == 422, patched.text
    assert patched.json()["error"]["field"] == "flow_control.key"
