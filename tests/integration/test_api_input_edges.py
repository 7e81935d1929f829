"""Inputs a new user sent that used to answer 500, 503 or a dropped connection: each is a
422 naming its field. And the order of refusals: authentication comes before the body."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.support.api import Api, Tenant, api_fixture, schedule_body  # noqa: F401 - fixtures

pytestmark = pytest.mark.asyncio

FAR = "9999-12-31T23:59:59-01:00"  # a valid offset, but past year 9999 once in UTC


def raw_json(body: Any) -> bytes:
    """JSON with every non-ASCII character escaped, so a lone surrogate can be sent."""
    return json.dumps(body, ensure_ascii=True).encode("ascii")


async def post_raw(api: Api, tenant: Tenant, body: Any) -> Any:
    return await api.client.post("/v1/schedules", content=raw_json(body), headers={
        **tenant.headers, "content-type": "application/json"})


def assert_names(response: Any, field: str) -> None:
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["field"] == field and error["message"].startswith(f"{field}: "), error
    assert "Value error" not in error["message"]


@pytest.mark.parametrize("field", ["starts_at", "ends_at"])
async def test_an_instant_past_year_9999_in_utc_is_a_422_on_create_and_patch(
    api: Api, field: str
) -> None:
    tenant = await api.tenant()
    assert_names(await post_raw(api, tenant, schedule_body(**{field: FAR})), field)
    created = await api.create_schedule(tenant)
    patched = await api.client.patch(f"/v1/schedules/{created['id']}", json={field: FAR},
                                     headers=tenant.headers)
    assert_names(patched, field)


@pytest.mark.parametrize("field", ["since", "until"])
async def test_a_run_query_bound_past_year_9999_is_a_422(api: Api, field: str) -> None:
    tenant = await api.tenant()
    response = await api.client.get("/v1/runs", params={field: FAR}, headers=tenant.headers)
    assert_names(response, field)


TEXT_FIELDS = ["name", "cron", "timezone", "misfire_policy", "target.url", "target.method",
               "target.body"]


@pytest.mark.parametrize("bad", ["a\x00b", "a\ud800b"], ids=["nul", "lone-surrogate"])
@pytest.mark.parametrize("path", TEXT_FIELDS)
async def test_nul_or_a_lone_surrogate_in_a_text_field_is_a_422_naming_it(
    api: Api, path: str, bad: str
) -> None:
    tenant = await api.tenant()
    body = schedule_body()
    *parents, leaf = path.split(".")
    node = body
    for name in parents:
        node = node[name]
    node[leaf] = bad
    assert_names(await post_raw(api, tenant, body), path)
    created = await api.create_schedule(tenant)
    patch = {"target": {leaf: bad}} if parents else {leaf: bad}
    response = await api.client.patch(f"/v1/schedules/{created['id']}", content=raw_json(patch),
                                      headers={**tenant.headers,
                                               "content-type": "application/json"})
    assert_names(response, path)
    assert await api.pool.fetchval("SELECT count(*) FROM schedule") == 1


@pytest.mark.parametrize("bad", ["a\x00b", "a\ud800b"], ids=["nul", "lone-surrogate"])
async def test_nul_or_a_lone_surrogate_in_a_header_is_a_422_naming_the_headers(
    api: Api, bad: str
) -> None:
    tenant = await api.tenant()
    for headers in ({"x-ok": bad}, {bad: "1"}):
        body = schedule_body(target={"url": "http://127.0.0.1:9/hook", "headers": headers})
        response = await post_raw(api, tenant, body)
        assert response.status_code == 422, response.text
        assert response.json()["error"]["field"].startswith("target.headers")


async def test_an_unencoded_plus_in_a_query_offset_says_to_encode_it(api: Api) -> None:
    tenant = await api.tenant()
    response = await api.client.get("/v1/runs?since=2027-01-01T00:00:00+01:00",
                                    headers=tenant.headers)
    assert_names(response, "since")
    assert "%2B" in response.json()["error"]["message"]
    encoded = await api.client.get("/v1/runs?since=2027-01-01T00:00:00%2B01:00",
                                   headers=tenant.headers)
    assert encoded.status_code == 200, encoded.text


async def test_validator_messages_have_no_pydantic_prefix(api: Api) -> None:
    tenant = await api.tenant()
    response = await api.client.post("/v1/schedules", json=schedule_body(starts_at="yesterday"),
                                     headers=tenant.headers)
    assert_names(response, "starts_at")


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer cwt_nope"}],
                         ids=["no-token", "unknown-token"])
@pytest.mark.parametrize(("method", "path"), [("POST", "/v1/schedules"),
                                              ("PATCH", "/v1/schedules/{id}")])
async def test_authentication_comes_before_the_body(
    api: Api, headers: dict[str, str], method: str, path: str
) -> None:
    tenant = await api.tenant()
    created = await api.create_schedule(tenant)
    url = path.format(id=created["id"])
    for content in (b'{"name": ', b"\xff\xfe{", b'{"colour": 1}'):
        response = await api.client.request(method, url, content=content, headers={
            **headers, "content-type": "application/json"})
        assert response.status_code == 401, (content, response.text)
        assert response.headers["www-authenticate"].startswith("Bearer")
    query = await api.client.get("/v1/runs", params={"since": "yesterday"}, headers=headers)
    assert query.status_code == 401
