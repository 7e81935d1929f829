"""PATCH is a JSON merge patch (RFC 7396): only what is sent changes, nested objects are
merged member by member, and null removes what it names where that means something."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from cronwire.adapters.postgres.schedule_store import PostgresScheduleStore
from cronwire.domain.documents import target_to_document
from tests.support.api import Api, Tenant, api_fixture  # noqa: F401 - fixtures
from tests.support.secrets import secret_box

pytestmark = pytest.mark.asyncio


def masked(target: dict[str, Any]) -> dict[str, Any]:
    """A target as reads show it: every header value masked (sealed secrets, ADR 0061),
    and no client certificate (``tls``, null when there is none)."""
    return {**target, "headers": dict.fromkeys(target["headers"], "***"), "tls": None}


async def stored_target(api: Api, tenant: Tenant, schedule: dict[str, Any]) -> dict[str, Any]:
    """The target as stored, header values opened."""
    record = await PostgresScheduleStore(api.pool, secret_box(api.pool)).get(
        tenant.id, uuid.UUID(schedule["id"]))
    return target_to_document(record.spec.target)

TARGET = {"url": "http://127.0.0.1:9/hook", "method": "PUT",
          "headers": {"x-one": "1", "X-Two": "2"}, "body": "{\"k\": 1}"}
RETRY = {"max_attempts": 5, "initial_backoff_seconds": 7.0, "max_backoff_seconds": 70.0}


async def patched(api: Api, tenant: Tenant, schedule: dict[str, Any],
                  patch: dict[str, Any], **headers: str) -> dict[str, Any]:
    response = await api.client.patch(f"/v1/schedules/{schedule['id']}", json=patch,
                                      headers={**tenant.headers, **headers})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


@pytest.mark.parametrize(("patch", "target"), [
    ({"url": "http://127.0.0.1:9/v2"}, {**TARGET, "url": "http://127.0.0.1:9/v2"}),
    ({"method": "POST"}, {**TARGET, "method": "POST"}),
    ({"method": None}, {**TARGET, "method": "POST"}),
    ({"body": "new"}, {**TARGET, "body": "new"}),
    ({"body": None}, {**TARGET, "body": None}),
    ({"headers": {"x-three": "3"}}, {**TARGET, "headers": {**TARGET["headers"], "x-three": "3"}}),
    ({"headers": {"x-one": "uno"}}, {**TARGET, "headers": {"x-one": "uno", "X-Two": "2"}}),
    ({"headers": {"x-two": None}}, {**TARGET, "headers": {"x-one": "1"}}),
    ({"headers": None}, {**TARGET, "headers": {}}),
])
async def test_a_target_patch_changes_only_the_members_sent(
    api: Api, patch: dict[str, Any], target: dict[str, Any]
) -> None:
    tenant = await api.tenant()
    created = await api.create_schedule(tenant, target=TARGET, retry=RETRY)
    after = await patched(api, tenant, created, {"target": patch})
    assert after["target"] == masked(target)
    assert await stored_target(api, tenant, created) == target
    assert after["retry"] == RETRY and after["name"] == created["name"]


@pytest.mark.parametrize(("patch", "retry"), [
    ({"max_attempts": 2}, {**RETRY, "max_attempts": 2}),
    ({"initial_backoff_seconds": 1.5}, {**RETRY, "initial_backoff_seconds": 1.5}),
    ({"max_backoff_seconds": 700.0}, {**RETRY, "max_backoff_seconds": 700.0}),
    ({"max_attempts": None}, {**RETRY, "max_attempts": 3}),
    ({}, RETRY),
])
async def test_a_retry_patch_changes_only_the_members_sent(
    api: Api, patch: dict[str, Any], retry: dict[str, Any]
) -> None:
    tenant = await api.tenant()
    created = await api.create_schedule(tenant, target=TARGET, retry=RETRY)
    after = await patched(api, tenant, created, {"retry": patch})
    assert after["retry"] == retry and after["target"] == masked(TARGET)
    assert await stored_target(api, tenant, created) == TARGET


async def test_the_merge_patch_media_type_is_accepted_and_an_empty_patch_changes_nothing(
    api: Api,
) -> None:
    tenant = await api.tenant()
    created = await api.create_schedule(tenant, target=TARGET, retry=RETRY)
    same = await patched(api, tenant, created, {},
                         **{"content-type": "application/merge-patch+json"})
    unchanged = {"signing_secret", "updated_at"}  # an edit, even an empty one, is dated
    assert {k: v for k, v in same.items() if k not in unchanged} == {
        k: v for k, v in created.items() if k not in unchanged}


@pytest.mark.parametrize(("patch", "field"), [
    ({"target": None}, "target"), ({"retry": None}, "retry"),
    ({"target": {"url": None}}, "target.url"), ({"target": {"colour": 1}}, "target.colour"),
    ({"retry": {"max_attempts": 0}}, "retry.max_attempts"),
    ({"retry": {"max_backoff_seconds": 1.0}}, "retry.max_backoff_seconds"),  # < initial 7
])
async def test_a_merge_that_breaks_a_rule_is_a_422_and_changes_nothing(
    api: Api, patch: dict[str, Any], field: str
) -> None:
    tenant = await api.tenant()
    created = await api.create_schedule(tenant, target=TARGET, retry=RETRY)
    response = await api.client.patch(f"/v1/schedules/{created['id']}", json=patch,
                                      headers=tenant.headers)
    assert response.status_code == 422, response.text
    assert response.json()["error"]["field"] == field
    after = (await api.client.get(f"/v1/schedules/{created['id']}",
                                  headers=tenant.headers)).json()
    assert after["target"] == masked(TARGET) and after["retry"] == RETRY
    assert await stored_target(api, tenant, created) == TARGET
