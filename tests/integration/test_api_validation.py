"""Every validation rule answers 422 naming its field, every per-tenant limit answers
422/429 naming the limit, and an oversize request body is refused before it is parsed."""

from __future__ import annotations

import copy
import dataclasses
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest

from cronwire.adapters.http.guard import TargetGuard
from cronwire.domain.schedules import TenantLimits
from tests.support.api import (  # noqa: F401 - fixtures
    DEFAULT_LIMITS,
    Api,
    Tenant,
    api_fixture,
    api_variant_fixture,
    schedule_body,
)

pytestmark = pytest.mark.asyncio


def body_with(path: str, value: Any) -> dict[str, Any]:
    """A valid create body with one (dotted) field set to ``value``."""
    body = copy.deepcopy(schedule_body())
    *parents, leaf = path.split(".")
    node = body
    for name in parents:
        node = node[name]
    node[leaf] = value
    return body


# (field to break, bad value, the field the error must name)
RULES: list[tuple[str, Any, str]] = [
    ("name", "", "name"),
    ("name", "   ", "name"),
    ("name", "n" * 201, "name"),
    ("name", 7, "name"),
    ("cron", "* * * *", "cron"),  # 4 fields
    ("cron", "* * * * * * *", "cron"),  # 7 fields
    ("cron", "61 * * * *", "cron"),
    ("cron", "0 0 30 2 *", "cron"),  # never fires
    ("cron", "@fortnightly", "cron"),
    ("timezone", "Mars/Olympus_Mons", "timezone"),
    ("timezone", "", "timezone"),
    ("target.url", "ftp://example.com/x", "target.url"),
    ("target.url", "http://", "target.url"),
    ("target.url", "http://user:pw@127.0.0.1/", "target.url"),
    ("target.url", "/relative/path", "target.url"),
    ("target.url", "http://127.0.0.1/a b", "target.url"),
    ("target.method", "TRACE", "target.method"),
    ("target.method", "post", "target.method"),
    ("target.headers", {"bad header": "1"}, "target.headers"),
    ("target.headers", {"x:y": "1"}, "target.headers"),
    ("target.headers", {"webhook-id": "mine"}, "target.headers"),
    ("target.headers", {"X-Cronwire-Attempt": "9"}, "target.headers"),
    ("target.headers", {"Host": "elsewhere"}, "target.headers"),
    ("target.headers", {"x-ok": "line\r\nbreak: 1"}, "target.headers"),
    # Control characters other than HTAB (VT, FF, NEL, DEL, ESC).
    ("target.headers", {"x-ok": "a\x0bb"}, "target.headers"),
    ("target.headers", {"x-ok": "a\x0cb"}, "target.headers"),
    ("target.headers", {"x-ok": "a\x85b"}, "target.headers"),
    ("target.headers", {"x-ok": "a\x7fb"}, "target.headers"),
    ("target.headers", {"x-ok": "a\x1bb"}, "target.headers"),
    ("target.headers", {"x-num": 1}, "target.headers.x-num"),
    ("retry.max_attempts", 0, "retry.max_attempts"),
    ("retry.max_attempts", 9, "retry.max_attempts"),
    ("retry.max_attempts", "3", "retry.max_attempts"),
    ("retry.max_attempts", 2.5, "retry.max_attempts"),
    ("retry.initial_backoff_seconds", 0, "retry.initial_backoff_seconds"),
    ("retry.initial_backoff_seconds", -1, "retry.initial_backoff_seconds"),
    ("retry.initial_backoff_seconds", 5e-324, "retry.initial_backoff_seconds"),  # ADR 0055
    ("retry.initial_backoff_seconds", 0.009, "retry.initial_backoff_seconds"),
    ("retry.max_backoff_seconds", 5, "retry.max_backoff_seconds"),  # below initial (10)
    ("retry.max_backoff_seconds", 10**9, "retry.max_backoff_seconds"),
    ("misfire_policy", "sometimes", "misfire_policy"),
    ("catchup_window_seconds", -1, "catchup_window_seconds"),
    ("starts_at", "2027-01-01T00:00:00", "starts_at"),  # no offset
    ("starts_at", "yesterday", "starts_at"),
    ("starts_at", 1700000000, "starts_at"),  # a Unix timestamp is not RFC 3339
    ("ends_at", "0", "ends_at"),
    ("paused", "no", "paused"),
    ("colour", "blue", "colour"),  # unknown field
]


async def test_each_rule_is_a_422_naming_its_field(api: Api) -> None:
    tenant = await api.tenant()
    wrong: list[str] = []
    for path, value, field in RULES:
        response = await api.client.post("/v1/schedules", json=body_with(path, value),
                                         headers=tenant.headers)
        error = response.json().get("error", {})
        if (response.status_code, error.get("field")) != (422, field) or not str(
            error.get("message", "")
        ).startswith(f"{field}: "):
            wrong.append(f"{path}={value!r}: {response.status_code} {response.text}")
    assert not wrong, "\n".join(wrong)
    assert await api.pool.fetchval("SELECT count(*) FROM schedule") == 0


async def test_boundary_values_are_accepted(api: Api) -> None:
    tenant = await api.tenant()
    for path, value in [("retry.max_attempts", 1), ("retry.max_attempts", 8),
                        ("cron", "*/10 * * * * *"), ("cron", "@hourly"),
                        ("target.method", "DELETE"), ("target.body", None),
                        ("target.headers", {"X-Signed-By": "me", "!#$%&'*+.^_`|~": "ok"}),
                        ("target.headers", {"X-Tabbed": "a\tb", "X-Unicode": "é ✓"}),
                        ("timezone", "America/Argentina/Buenos_Aires"),
                        ("catchup_window_seconds", 0), ("misfire_policy", "skip")]:
        response = await api.client.post("/v1/schedules", json=body_with(path, value),
                                         headers=tenant.headers)
        assert response.status_code == 201, f"{path}={value!r}: {response.text}"


async def test_starts_at_must_precede_ends_at(api: Api) -> None:
    tenant = await api.tenant()
    body = schedule_body(starts_at="2027-01-02T00:00:00Z", ends_at="2027-01-01T00:00:00+00:00")
    response = await api.client.post("/v1/schedules", json=body, headers=tenant.headers)
    assert response.status_code == 422
    assert response.json()["error"]["field"] == "ends_at"
    created = await api.create_schedule(tenant, starts_at="2027-01-01T00:00:00Z")
    patch = await api.client.patch(f"/v1/schedules/{created['id']}",
                                   json={"ends_at": "2026-12-31T00:00:00Z"}, headers=tenant.headers)
    assert patch.status_code == 422 and patch.json()["error"]["field"] == "ends_at"


async def test_patch_validates_like_create_and_changes_nothing_on_refusal(api: Api) -> None:
    tenant = await api.tenant()
    created = await api.create_schedule(tenant)
    url = f"/v1/schedules/{created['id']}"
    for body, field in [({"cron": "not cron"}, "cron"), ({"name": None}, "name"),
                        ({"target": {"url": "gopher://x"}}, "target.url"),
                        ({"retry": {"max_attempts": 12}}, "retry.max_attempts"),
                        ({"timezone": "Nowhere/Land"}, "timezone"),
                        ({"misfire_policy": None}, "misfire_policy"),
                        ({"paused": True}, "paused")]:
        response = await api.client.patch(url, json=body, headers=tenant.headers)
        assert response.status_code == 422, response.text
        assert response.json()["error"]["field"] == field, body
    after = (await api.client.get(url, headers=tenant.headers)).json()
    assert after == {k: v for k, v in created.items() if k != "signing_secret"}


@pytest.fixture
async def guarded(api_variant: Callable[..., httpx.AsyncClient]) -> AsyncIterator[httpx.AsyncClient]:
    """A client whose API enforces the address policy, with a DNS stub (no network here)."""
    answers = {"public.example": ["93.184.215.14"], "rebind.example": ["93.184.215.14", "10.1.2.3"],
               "metadata.example": ["169.254.169.254"]}

    async def resolve(host: str, _port: int) -> list[str]:
        if host not in answers:
            raise OSError(f"{host} does not resolve")
        return answers[host]

    guard = TargetGuard(allow_private=False, resolve=resolve)
    async with api_variant(check_url=guard.check_url) as client:
        yield client


@pytest.mark.parametrize("url", [
    "http://127.0.0.1/hook", "http://2130706433/hook", "http://[::1]/", "http://[::ffff:127.0.0.1]/",
    "http://10.0.0.8/", "http://169.254.169.254/latest/meta-data", "http://metadata.example/",
    "http://rebind.example/", "http://nowhere.example/",
])
async def test_ssrf_policy_refuses_private_targets_at_create_time(
    api: Api, guarded: httpx.AsyncClient, url: str
) -> None:
    tenant = await api.tenant()
    response = await guarded.post("/v1/schedules", json=body_with("target.url", url),
                                  headers=tenant.headers)
    assert response.status_code == 422, response.text
    assert response.json()["error"]["field"] == "target.url"


async def test_ssrf_policy_admits_public_targets_and_applies_to_patch(
    api: Api, guarded: httpx.AsyncClient
) -> None:
    tenant = await api.tenant()
    ok = await guarded.post("/v1/schedules", json=body_with("target.url", "https://public.example/h"),
                            headers=tenant.headers)
    assert ok.status_code == 201, ok.text
    patch = await guarded.patch(f"/v1/schedules/{ok.json()['id']}",
                                json={"target": {"url": "http://10.9.9.9/"}}, headers=tenant.headers)
    assert patch.status_code == 422 and patch.json()["error"]["field"] == "target.url"


def limits(**changes: int) -> TenantLimits:
    return dataclasses.replace(DEFAULT_LIMITS, **changes)


async def _post(client: httpx.AsyncClient, tenant: Tenant, **overrides: Any) -> httpx.Response:
    return await client.post("/v1/schedules", json=schedule_body(**overrides),
                             headers=tenant.headers)


async def test_limits_default_from_configuration_and_a_tenant_can_override_them(
    api: Api, api_variant: Callable[..., httpx.AsyncClient]
) -> None:
    small = limits(max_body_bytes=10, max_headers=1, min_interval_seconds=60, max_schedules=2)
    tenant, roomy = await api.tenant("defaults"), await api.tenant("own limits")
    await api.pool.execute(
        "UPDATE tenant SET max_body_bytes = 100, max_headers = 3, min_interval_seconds = 1, "
        "max_schedules = 10 WHERE id = $1", roomy.id)
    async with api_variant(default_limits=small) as client:
        cases = [
            ({"target": {"url": "http://127.0.0.1/", "body": "x" * 11}}, "max_body_bytes",
             "target.body"),
            ({"target": {"url": "http://127.0.0.1/", "headers": {"a": "1", "b": "2"}}},
             "max_headers", "target.headers"),
            ({"cron": "* * * * * *"}, "min_interval_seconds", "cron"),
            ({"cron": "*/30 * * * * *"}, "min_interval_seconds", "cron"),
        ]
        for overrides, limit, field in cases:
            refused = await _post(client, tenant, **overrides)
            assert refused.status_code == 422, refused.text
            error = refused.json()["error"]
            assert (error["code"], error["limit"], error["field"]) == ("limit_exceeded", limit,
                                                                       field)
            assert error["message"].startswith(f"{limit}: ")
            # The same request is within the tenant's own (larger) limits.
            assert (await _post(client, roomy, **overrides)).status_code == 201, limit
        # Multi-byte characters count as bytes, not characters: 4 x 3 bytes > 10.
        euro = await _post(client, tenant, target={"url": "http://127.0.0.1/", "body": "€€€€"})
        assert euro.status_code == 422 and euro.json()["error"]["limit"] == "max_body_bytes"
        assert (await _post(client, tenant, cron="* * * * *")).status_code == 201

        # max_schedules is a quota: 429, and freed by a delete.
        second = await _post(client, tenant)
        assert second.status_code == 201
        third = await _post(client, tenant)
        assert third.status_code == 429, third.text
        assert third.json()["error"]["limit"] == "max_schedules"
        assert third.json()["error"]["message"].startswith("max_schedules: ")
        await client.delete(f"/v1/schedules/{second.json()['id']}", headers=tenant.headers)
        assert (await _post(client, tenant)).status_code == 201


async def test_oversize_bodies_are_refused_before_parsing(
    api: Api, api_variant: Callable[..., httpx.AsyncClient]
) -> None:
    tenant = await api.tenant()
    async with api_variant(max_request_bytes=1024) as client:
        # Invalid JSON over the cap: 413, not 422, so nothing tried to parse it.
        raw = b"{" * 2048
        response = await client.post("/v1/schedules", content=raw, headers={
            **tenant.headers, "content-type": "application/json"})
        assert response.status_code == 413
        assert response.json()["error"] == {"code": "payload_too_large", "field": "body",
                                             "limit": None, "message": response.json()["error"]["message"]}
        assert response.json()["error"]["message"].startswith("body: ")

        # A declared length over the cap is refused without reading a single chunk.
        pulled: list[int] = []

        async def stream() -> AsyncIterator[bytes]:
            for i in range(64):
                pulled.append(i)
                yield b"x" * 64

        declared = await client.post("/v1/schedules", content=stream(), headers={
            **tenant.headers, "content-type": "application/json", "content-length": "4096"})
        assert declared.status_code == 413
        assert pulled == []

        # A chunked body (no length) is cut off as soon as it passes the cap.
        pulled.clear()
        chunked = await client.post("/v1/schedules", content=stream(), headers={
            **tenant.headers, "content-type": "application/json"})
        assert chunked.status_code == 413
        assert len(pulled) <= 1024 // 64 + 1 < 64

        # Under the cap the same route works, and unauthenticated oversize is also 413.
        assert (await client.patch(f"/v1/schedules/{uuid.uuid4()}", json={"name": "x"},
                                   headers=tenant.headers)).status_code == 404
        assert (await client.post("/v1/schedules", content=raw)).status_code == 413
    assert await api.pool.fetchval("SELECT count(*) FROM schedule") == 0


async def test_malformed_json_and_wrong_types_name_the_body(api: Api) -> None:
    tenant = await api.tenant()
    response = await api.client.post("/v1/schedules", content=b'{"name": ', headers={
        **tenant.headers, "content-type": "application/json"})
    assert response.status_code == 422 and response.json()["error"]["field"] == "body"
    undecodable = await api.client.post("/v1/schedules", content=b"\xff\xfe{", headers={
        **tenant.headers, "content-type": "application/json"})
    assert undecodable.status_code == 422 and undecodable.json()["error"]["field"] == "body"
    response = await api.client.post("/v1/schedules", json=[1, 2], headers=tenant.headers)
    assert response.status_code == 422 and response.json()["error"]["field"] == "body"
    missing = await api.client.post("/v1/schedules", json={"name": "x"}, headers=tenant.headers)
    assert missing.status_code == 422 and missing.json()["error"]["field"] == "target"
    untimed = await api.client.post("/v1/schedules", headers=tenant.headers, json={
        "name": "x", "target": {"url": "http://127.0.0.1:9/"}})
    assert untimed.status_code == 422 and untimed.json()["error"]["field"] == "cron"


@pytest.mark.parametrize(("params", "field"), [
    ({"status": "bogus"}, "status"),
    ({"since": "2027-01-01T00:00:00"}, "since"),
    ({"until": "0"}, "until"),  # pydantic alone would read these as Unix timestamps
    ({"until": "-1"}, "until"),
    ({"since": "1700000000"}, "since"),
    ({"since": "2027-01-02T00:00:00Z", "until": "2027-01-01T00:00:00Z"}, "until"),
    ({"cursor": "not-a-cursor"}, "cursor"),
    ({"cursor": "czE6MDAwMA"}, "cursor"),  # a schedule cursor is not a run cursor
    ({"limit": 0}, "limit"),
    ({"limit": 201}, "limit"),
    ({"schedule_id": "12"}, "schedule_id"),
])
async def test_run_query_parameters_are_validated(
    api: Api, params: dict[str, Any], field: str
) -> None:
    tenant = await api.tenant()
    response = await api.client.get("/v1/runs", params=params, headers=tenant.headers)
    assert response.status_code == 422, response.text
    assert response.json()["error"]["field"] == field


async def test_path_ids_and_schedule_cursors_are_validated(api: Api) -> None:
    tenant = await api.tenant()
    for path in ("/v1/schedules/12", "/v1/runs/not-a-uuid"):
        response = await api.client.get(path, headers=tenant.headers)
        assert response.status_code == 422 and response.json()["error"]["field"] == "id"
    bad = await api.client.get("/v1/schedules", params={"cursor": "%%%"}, headers=tenant.headers)
    assert bad.status_code == 422 and bad.json()["error"]["field"] == "cursor"
