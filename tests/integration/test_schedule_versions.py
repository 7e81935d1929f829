"""Schedule versions (ADR 0056): 1 on create, +1 per change, `ETag: "N"`, `If-Match` on
PATCH, DELETE, pause and resume (412 with the current version when stale), the revisions
and a restore that is a new version. Two API replicas (two apps on two pools, one
database) PATCHing with the same If-Match: exactly one wins."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import asyncpg

from cronwire.adapters.postgres.pool import create_pool
from cronwire.adapters.postgres.schedule_store import PostgresScheduleStore
from cronwire.adapters.postgres.tenants import PostgresTenantStore
from tests.support.api import Api, api_context, api_fixture, asgi_client  # noqa: F401
from tests.support.secrets import secret_box


def _if_match(headers: dict[str, str], version: Any) -> dict[str, str]:
    return {**headers, "If-Match": f'"{version}"'}


async def test_versions_etags_and_stale_if_match(api: Api) -> None:
    tenant = await api.tenant("versions")
    created = await api.create_schedule(tenant)
    path = f"/v1/schedules/{created['id']}"
    assert created["version"] == 1
    got = await api.client.get(path, headers=tenant.headers)
    assert got.headers["ETag"] == '"1"' and got.json()["version"] == 1
    edited = await api.client.patch(path, json={"name": "v2"},
                                    headers=_if_match(tenant.headers, 1))
    assert edited.status_code == 200 and edited.headers["ETag"] == '"2"'
    paused = await api.client.post(f"{path}/pause", headers=_if_match(tenant.headers, 2))
    assert paused.status_code == 200 and paused.json()["version"] == 3
    resumed = await api.client.post(f"{path}/resume", headers=_if_match(tenant.headers, 3))
    assert resumed.status_code == 200 and resumed.headers["ETag"] == '"4"'
    for method, suffix, body in (("PATCH", "", {"name": "late"}), ("POST", "/pause", None),
                                 ("POST", "/resume", None), ("DELETE", "", None)):
        stale = await api.client.request(method, path + suffix, json=body,
                                         headers=_if_match(tenant.headers, 2))
        assert stale.status_code == 412, (method, suffix, stale.text)
        assert stale.headers["ETag"] == '"4"'
        error = stale.json()["error"]
        assert error["code"] == "precondition_failed" and error["field"] == "If-Match"
        assert "version 4" in error["message"]
    now = (await api.client.get(path, headers=tenant.headers)).json()
    assert now["name"] == "v2" and now["status"] == "active" and now["version"] == 4
    bad = await api.client.patch(path, json={"name": "x"},
                                 headers={**tenant.headers, "If-Match": "yesterday"})
    assert bad.status_code == 422 and bad.json()["error"]["field"] == "If-Match"
    anything = await api.client.patch(path, json={"name": "v5"},
                                      headers={**tenant.headers, "If-Match": "*"})
    assert anything.json()["version"] == 5
    rotated = await api.client.post(f"{path}/rotate-secret", headers=tenant.headers)
    assert rotated.status_code == 200
    assert (await api.client.get(path, headers=tenant.headers)).json()["version"] == 6
    gone = await api.client.delete(path, headers=_if_match(tenant.headers, 6))
    assert gone.status_code == 204


async def test_revisions_and_restore(api: Api) -> None:
    tenant = await api.tenant("restore")
    created = await api.create_schedule(tenant, target={
        "url": "http://127.0.0.1:9/v1", "headers": {"x-api-key": "first-key"}})
    schedule_id = created["id"]
    path = f"/v1/schedules/{schedule_id}"
    await api.client.patch(path, json={"name": "second", "cron": "0 4 * * *", "target": {
        "url": "http://127.0.0.1:9/v2", "headers": {"x-api-key": "second-key"}}},
        headers=tenant.headers)
    await api.client.post(f"{path}/pause", headers=tenant.headers)
    revisions = (await api.client.get(f"{path}/revisions", headers=tenant.headers)).json()
    items = revisions["items"]
    assert [r["version"] for r in items] == [3, 2, 1]
    assert items[0]["changes"]["status"] == ["active", "paused"]
    assert items[1]["changes"]["name"] == ["nightly-report", "second"]
    assert items[1]["changes"]["target.headers.x-api-key"] == ["***", "***"]
    assert set(items[1]) == {"version", "at", "actor", "changes"}
    assert "token_id" in items[1]["actor"]
    assert "second-key" not in str(revisions)

    stale = await api.client.post(f"{path}/revisions/1/restore",
                                  headers=_if_match(tenant.headers, 2))
    assert stale.status_code == 412
    restored = await api.client.post(f"{path}/revisions/1/restore",
                                     headers=_if_match(tenant.headers, 3))
    assert restored.status_code == 200, restored.text
    body = restored.json()
    assert body["version"] == 4 and body["name"] == "nightly-report"
    assert body["cron"] == "0 3 * * *" and body["status"] == "paused"  # pause state stays
    assert body["target"]["url"] == "http://127.0.0.1:9/v1"
    store = PostgresScheduleStore(api.pool, secret_box(api.pool))
    record = await store.get(tenant.id, uuid.UUID(schedule_id))
    assert dict(record.spec.target.headers) == {"x-api-key": "first-key"}  # opened again
    latest = (await api.client.get(f"{path}/revisions", params={"limit": 1},
                                   headers=tenant.headers)).json()["items"]
    assert latest[0]["version"] == 4 and latest[0]["changes"]["name"] == [
        "second", "nightly-report"]
    actions = await api.pool.fetch(
        "SELECT action FROM audit_event WHERE object_id = $1 ORDER BY at, id", schedule_id)
    assert [a["action"] for a in actions][-1] == "schedule.restore"
    missing = await api.client.post(f"{path}/revisions/99/restore", headers=tenant.headers)
    assert missing.status_code == 404


async def test_same_if_match_on_two_replicas_exactly_one_wins(
    database_url: str, db_pool: asyncpg.Pool,
) -> None:
    pools = [await create_pool(database_url, 4) for _ in range(2)]
    clients = [asgi_client(api_context(pool)) for pool in pools]
    try:
        issued = await PostgresTenantStore(db_pool).create("racers")
        headers = {"Authorization": f"Bearer {issued.token}"}
        created = await clients[0].post("/v1/schedules", json={
            "name": "raced", "cron": "0 3 * * *", "target": {"url": "http://127.0.0.1:9/"}},
            headers=headers)
        path = f"/v1/schedules/{created.json()['id']}"
        for round_ in range(20):
            version = (await clients[1].get(path, headers=headers)).json()["version"]
            answers = await asyncio.gather(*(
                client.patch(path, json={"name": f"round-{round_}-by-{i}"},
                             headers=_if_match(headers, version))
                for i, client in enumerate(clients)))
            codes = sorted(a.status_code for a in answers)
            assert codes == [200, 412], [a.text for a in answers]
            winner = next(a for a in answers if a.status_code == 200).json()
            loser = next(a for a in answers if a.status_code == 412)
            assert winner["version"] == version + 1
            assert loser.headers["ETag"] == f'"{version + 1}"'
            now = (await clients[0].get(path, headers=headers)).json()
            assert now["name"] == winner["name"] and now["version"] == version + 1
    finally:
        for http in clients:
            await http.aclose()
        for pool in pools:
            await pool.close()
