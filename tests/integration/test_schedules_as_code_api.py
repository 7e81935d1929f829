"""Schedules as code over the API against real Postgres (ADR 0057): key and
managed_by, PUT/GET/DELETE by key (the same body again writes nothing), and apply:
created, updated field by field, unchanged, pruned, dry runs, refusals that write
nothing, and two applies at once."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

from tests.support.api import Api, Tenant, api_fixture, schedule_body  # noqa: F401 - fixture


def definition(key: str, **overrides: Any) -> dict[str, Any]:
    body = schedule_body(**overrides)
    body.pop("paused")
    return {"key": key, **body}


async def _row_state(api: Api, tenant: Tenant) -> list[tuple[Any, ...]]:
    """Every schedule row of the tenant with its xmin: any UPDATE changes it."""
    rows = await api.pool.fetch(
        "SELECT id, xmin::text AS x, status, key, managed_by, updated_at FROM schedule "
        "WHERE tenant_id = $1 ORDER BY id", tenant.id)
    return [tuple(r) for r in rows]


async def _apply(api: Api, tenant: Tenant, schedules: list[dict[str, Any]],
                 status: int = 200, **extra: Any) -> dict[str, Any]:
    response = await api.client.post("/v1/schedules/apply", headers=tenant.headers,
                                     json={"schedules": schedules, **extra})
    assert response.status_code == status, response.text
    answer: dict[str, Any] = response.json()
    return answer


async def test_key_and_managed_by_on_create_patch_get_and_list(api: Api) -> None:
    tenant = await api.tenant()
    made = await api.create_schedule(tenant, key="billing.nightly", managed_by="git:acme")
    assert (made["key"], made["managed_by"]) == ("billing.nightly", "git:acme")
    got = (await api.client.get(f"/v1/schedules/{made['id']}", headers=tenant.headers)).json()
    assert got["key"] == "billing.nightly"
    listed = (await api.client.get("/v1/schedules", headers=tenant.headers)).json()["items"]
    assert [s["managed_by"] for s in listed] == ["git:acme"]
    patched = await api.client.patch(f"/v1/schedules/{made['id']}", headers=tenant.headers,
                                     json={"key": "billing.daily", "managed_by": None})
    assert patched.status_code == 200, patched.text
    assert (patched.json()["key"], patched.json()["managed_by"]) == ("billing.daily", None)


async def test_a_bad_key_is_a_422_naming_it_and_a_taken_one_a_409(api: Api) -> None:
    tenant = await api.tenant()
    for bad in ("Upper", "-lead", "a" * 129, "sp ace", "ü"):
        response = await api.client.post("/v1/schedules", headers=tenant.headers,
                                         json=schedule_body(key=bad))
        assert response.status_code == 422, (bad, response.text)
        assert response.json()["error"]["field"] == "key"
    await api.create_schedule(tenant, key="one")
    taken = await api.client.post("/v1/schedules", headers=tenant.headers,
                                  json=schedule_body(key="one"))
    assert taken.status_code == 409 and "one" in taken.json()["error"]["message"]
    other = await api.create_schedule(tenant, key="two")
    clash = await api.client.patch(f"/v1/schedules/{other['id']}", headers=tenant.headers,
                                   json={"key": "one"})
    assert clash.status_code == 409
    # Another tenant may use the same key; a deleted schedule gives its key back.
    await api.create_schedule(await api.tenant("other"), key="one")
    await api.client.delete(f"/v1/schedules/{other['id']}", headers=tenant.headers)
    await api.create_schedule(tenant, key="two")


async def test_put_by_key_creates_replaces_and_writes_nothing_for_the_same_body(api: Api) -> None:
    tenant = await api.tenant()
    body = schedule_body(managed_by="git:acme")
    body.pop("paused")
    created = await api.client.put("/v1/schedules/by-key/report", headers=tenant.headers,
                                   json=body)
    assert created.status_code == 201, created.text
    assert created.json()["signing_secret"].startswith("whsec_")
    assert created.json()["key"] == "report"
    before = await _row_state(api, tenant)
    again = await api.client.put("/v1/schedules/by-key/report", headers=tenant.headers,
                                 json=body)
    assert again.status_code == 200 and "signing_secret" not in again.json()
    assert again.json()["updated_at"] == created.json()["updated_at"]
    assert await _row_state(api, tenant) == before  # not even an UPDATE
    # The same meaning spelt otherwise is the same: zone case, header order and case,
    # 10 for 10.0, a header sent back masked.
    spelt = copy.deepcopy(body)
    spelt["timezone"] = "europe/berlin"
    spelt["target"]["headers"] = {"X-Custom": "***"}
    spelt["retry"]["initial_backoff_seconds"] = 10.0
    same = await api.client.put("/v1/schedules/by-key/report", headers=tenant.headers,
                                json=spelt)
    assert same.status_code == 200, same.text
    assert await _row_state(api, tenant) == before
    changed = await api.client.put("/v1/schedules/by-key/report", headers=tenant.headers,
                                   json={**body, "cron": "30 4 * * *"})
    assert changed.status_code == 200 and changed.json()["cron"] == "30 4 * * *"
    assert changed.json()["id"] == created.json()["id"]
    assert await _row_state(api, tenant) != before
    got = await api.client.get("/v1/schedules/by-key/report", headers=tenant.headers)
    assert got.json()["cron"] == "30 4 * * *"
    assert (await api.client.delete("/v1/schedules/by-key/report",
                                    headers=tenant.headers)).status_code == 204
    for method in ("GET", "DELETE"):
        gone = await api.client.request(method, "/v1/schedules/by-key/report",
                                        headers=tenant.headers)
        assert gone.status_code == 404
    mismatch = await api.client.put("/v1/schedules/by-key/report", headers=tenant.headers,
                                    json={**body, "key": "other"})
    assert mismatch.status_code == 422 and mismatch.json()["error"]["field"] == "key"


async def test_apply_creates_updates_and_counts_the_unchanged(api: Api) -> None:
    tenant = await api.tenant()
    first = [definition("a"), definition("b"), definition("c", target={
        "url": "http://127.0.0.1:9/c", "headers": {"authorization": "Bearer s3cret", "x-b": "2"}})]
    answer = await _apply(api, tenant, first, managed_by="git:acme")
    assert sorted(answer["created"]) == ["a", "b", "c"] and answer["unchanged"] == 0
    assert set(answer["signing_secrets"]) == {"a", "b", "c"}
    before = await _row_state(api, tenant)
    again = await _apply(api, tenant, first, managed_by="git:acme")
    assert again == {"created": [], "updated": [], "deleted": [], "unchanged": 3,
                     "dry_run": False, "signing_secrets": {}}
    assert await _row_state(api, tenant) == before
    second = copy.deepcopy(first)
    second[0]["cron"] = "15 3 * * *"
    second[2]["target"]["headers"] = {"x-b": "2", "authorization": "Bearer rotated"}
    second[1]["paused"] = True
    planned = await _apply(api, tenant, second, managed_by="git:acme", dry_run=True)
    assert await _row_state(api, tenant) == before  # a dry run writes nothing
    changes = {u["key"]: u["changes"] for u in planned["updated"]}
    assert changes == {"a": {"cron": ["0 3 * * *", "15 3 * * *"]},
                       "b": {"paused": [False, True]},
                       "c": {"target.headers.authorization": ["***", "***"]}}
    assert "s3cret" not in str(planned) and "rotated" not in str(planned)
    applied = await _apply(api, tenant, second, managed_by="git:acme")
    assert {u["key"]: u["changes"] for u in applied["updated"]} == changes
    b = (await api.client.get("/v1/schedules/by-key/b", headers=tenant.headers)).json()
    assert b["status"] == "paused"
    # Leaving `paused` out keeps the pause as it is.
    assert (await _apply(api, tenant, first, managed_by="git:acme"))["updated"][0]["key"] == "a"


async def test_prune_deletes_only_its_own_managed_by(api: Api) -> None:
    tenant = await api.tenant()
    await _apply(api, tenant, [definition("mine-1"), definition("mine-2")], managed_by="git:a")
    await _apply(api, tenant, [definition("theirs")], managed_by="git:b")
    await api.create_schedule(tenant, key="by-hand")
    await api.create_schedule(tenant)  # no key at all
    answer = await _apply(api, tenant, [definition("mine-1")], managed_by="git:a", prune=True)
    assert answer["deleted"] == ["mine-2"] and answer["unchanged"] == 1
    keys = sorted(str(s["key"]) for s in (await api.client.get(
        "/v1/schedules", headers=tenant.headers)).json()["items"])
    assert keys == ["None", "by-hand", "mine-1", "theirs"]
    refused = await _apply(api, tenant, [], status=422, prune=True)
    assert refused["error"]["field"] == "prune"


async def test_a_bad_definition_names_index_key_and_field_and_nothing_is_written(
        api: Api) -> None:
    tenant = await api.tenant()
    await _apply(api, tenant, [definition("keep")], managed_by="git:a")
    before = await _row_state(api, tenant)
    cases = [
        (definition("bad-cron", cron="61 * * * *"), "schedules[1].cron"),
        (definition("bad-zone", timezone="Mars/Base"), "schedules[1].timezone"),
        ({**definition("typo"), "crn": "* * * * *"}, "schedules[1].crn"),
        (definition("Bad Key"), "schedules[1].key"),
        (definition("new-one"), "schedules[1].key"),  # listed twice
        (definition("bad-policy", misfire_policy="sometimes"), "schedules[1].misfire_policy"),
        (definition("bad-header", target={"url": "http://127.0.0.1:9/",
                                          "headers": {"x-new": "***"}}),
         "schedules[1].target.headers.x-new"),
    ]
    for bad, field in cases:
        answer = await _apply(api, tenant, [definition("new-one"), bad], status=422,
                              managed_by="git:a", prune=True)
        assert answer["error"]["field"] == field, answer
        if field != "schedules[1].key":
            assert repr(bad["key"]) in answer["error"]["message"], answer
    assert await _row_state(api, tenant) == before
    too_many = await _apply(api, tenant, [definition(f"k{i}") for i in range(10_001)],
                            status=422)
    assert too_many["error"]["field"] == "schedules"


async def test_concurrent_applies_serialise_and_the_second_sees_the_first(api: Api) -> None:
    tenant = await api.tenant()
    one = [definition(f"s{i}", cron="0 1 * * *") for i in range(40)]
    two = [definition(f"s{i}", cron="0 2 * * *") for i in range(40)]
    first, second = await asyncio.gather(
        _apply(api, tenant, one, managed_by="git:a"), _apply(api, tenant, two, managed_by="git:a"))
    # One created all 40; the other found them and changed each one's cron.
    answers = sorted([first, second], key=lambda a: len(a["created"]), reverse=True)
    assert len(answers[0]["created"]) == 40 and answers[0]["updated"] == []
    assert answers[1]["created"] == [] and len(answers[1]["updated"]) == 40
    winner_cron = answers[1]["updated"][0]["changes"]["cron"][1]
    crons = {s["cron"] for s in (await api.client.get(
        "/v1/schedules", headers=tenant.headers, params={"limit": 200})).json()["items"]}
    assert crons == {winner_cron}
    assert (await api.pool.fetchval("SELECT count(*) FROM schedule WHERE tenant_id = $1",
                                    tenant.id)) == 40


async def test_an_apply_writes_versions_and_audit_rows_and_the_same_again_writes_none(
        api: Api) -> None:
    """Scopes, audit and versions (ADR 0056) hold for schedules as code: every schedule an
    apply creates, changes or prunes has its audit row with the caller; an unchanged one
    keeps its version and gets none; a PUT of the same body answers the same version."""
    tenant = await api.tenant()
    files = [definition("a.one"), definition("a.two")]
    await _apply(api, tenant, files, managed_by="git:acme")

    async def audit() -> list[tuple[str, str | None]]:
        items = (await api.client.get("/v1/audit", headers=tenant.headers)).json()["items"]
        return [(i["action"], i["actor"].get("token_id")) for i in items
                if i["action"].startswith("schedule.")]

    created = await audit()
    assert [a for a, _ in created] == ["schedule.create", "schedule.create"]
    assert all(token is not None for _, token in created)  # the caller, not the system
    again = await _apply(api, tenant, files, managed_by="git:acme")
    assert again["unchanged"] == 2 and await audit() == created
    put = await api.client.put("/v1/schedules/by-key/a.one", headers=tenant.headers,
                               json={k: v for k, v in files[0].items() if k != "key"})
    assert put.status_code == 200 and put.json()["version"] == 1
    assert await audit() == created
    changed = await _apply(api, tenant, [definition("a.one", name="renamed")],
                           managed_by="git:acme", prune=True)
    assert changed["deleted"] == ["a.two"]
    actions = [a for a, _ in await audit()]
    assert sorted(actions[:2]) == ["schedule.delete", "schedule.update"]
    got = (await api.client.get("/v1/schedules/by-key/a.one", headers=tenant.headers)).json()
    assert got["version"] == 2 and got["name"] == "renamed"
