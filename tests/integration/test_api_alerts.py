"""/v1/alerts over real Postgres: the destination's address policy and secret, event
types, a schedule's alert rules, and the events' keyset pages."""

from __future__ import annotations

import uuid

from tests.support.api import Api, api_context, api_fixture, asgi_client  # noqa: F401 - fixture


async def test_the_destination_passes_the_target_address_policy(api: Api) -> None:
    tenant = await api.tenant()
    async with asgi_client(api_context(api.pool, allow_private=False)) as client:
        for url, words in [("http://127.0.0.1:9/alerts", "127.0.0.1"),
                           ("http://169.254.169.254/latest", "169.254.169.254"),
                           ("ftp://example.com/x", "scheme"), ("not a url", "url"),
                           ("http://example.com/\x00", "url"),
                           ("http://example.com/" + "a" * 5000, "url")]:
            refused = await client.put("/v1/alerts", json={"url": url}, headers=tenant.headers)
            assert refused.status_code == 422, (url, refused.text)
            error = refused.json()["error"]
            assert error["field"] == "url" and words in error["message"], error
    assert (await api.client.get("/v1/alerts", headers=tenant.headers)).status_code == 404


async def test_the_secret_is_shown_once_and_each_put_replaces_it(api: Api) -> None:
    tenant = await api.tenant()
    first = await api.client.put("/v1/alerts", json={"url": "http://127.0.0.1:9/a"},
                                 headers=tenant.headers)
    assert first.status_code == 200 and first.json()["signing_secret"].startswith("whsec_")
    shown = (await api.client.get("/v1/alerts", headers=tenant.headers)).json()
    assert shown["url"] == "http://127.0.0.1:9/a" and "signing_secret" not in shown
    assert shown["events"] == ["schedule.failing", "schedule.recovered", "schedule.late",
                               "schedule.slow", "schedule.paused"]
    second = await api.client.put("/v1/alerts", json={"url": "http://127.0.0.1:9/b",
                                                      "events": ["schedule.late"]},
                                  headers=tenant.headers)
    assert second.json()["signing_secret"] != first.json()["signing_secret"]
    assert second.json()["events"] == ["schedule.late"]
    bad = await api.client.put("/v1/alerts", json={"url": "http://127.0.0.1:9/b",
                                                   "events": ["schedule.exploded"]},
                               headers=tenant.headers)
    assert bad.status_code == 422 and bad.json()["error"]["field"] == "events"
    extra = await api.client.put("/v1/alerts", json={"url": "http://127.0.0.1:9/b",
                                                     "secret": "mine"}, headers=tenant.headers)
    assert extra.status_code == 422


async def test_alert_rules_are_validated_and_merged_rule_by_rule(api: Api) -> None:
    tenant = await api.tenant()
    schedule = await api.create_schedule(tenant, alerts={"after_failures": 3})
    assert schedule["alerts"] == {"after_failures": 3, "late_after_seconds": None,
                                  "max_duration_ms": None}
    path = f"/v1/schedules/{schedule['id']}"
    patched = await api.client.patch(path, json={"alerts": {"max_duration_ms": 500}},
                                     headers=tenant.headers)
    assert patched.json()["alerts"] == {"after_failures": 3, "late_after_seconds": None,
                                        "max_duration_ms": 500}
    removed = await api.client.patch(path, json={"alerts": {"after_failures": None}},
                                     headers=tenant.headers)
    assert removed.json()["alerts"]["after_failures"] is None
    cleared = await api.client.patch(path, json={"alerts": None}, headers=tenant.headers)
    assert set(cleared.json()["alerts"].values()) == {None}
    for rules, field in [({"after_failures": 0}, "alerts.after_failures"),
                         ({"late_after_seconds": 10**9}, "alerts.late_after_seconds"),
                         ({"max_duration_ms": "5"}, "alerts.max_duration_ms"),
                         ({"every": 1}, "alerts.every")]:
        bad = await api.client.patch(path, json={"alerts": rules}, headers=tenant.headers)
        assert bad.status_code == 422, bad.text
        assert field in bad.json()["error"]["message"], bad.json()


async def test_events_page_newest_first_with_a_stable_cursor(api: Api) -> None:
    tenant = await api.tenant()
    schedule = await api.create_schedule(tenant)
    for n in range(5):
        await api.pool.execute(
            "INSERT INTO alert_event (id, tenant_id, schedule_id, schedule_name, type, "
            "created_at, detail) VALUES ($1, $2, $3, 'nightly-report', 'schedule.late', "
            "now() - make_interval(secs => $4), $5)",
            uuid.uuid4(), tenant.id, uuid.UUID(schedule["id"]), float(n), {"n": n})
    seen: list[int] = []
    cursor = None
    for _ in range(5):
        params = {"limit": 2, **({"cursor": cursor} if cursor else {})}
        page = (await api.client.get("/v1/alerts/events", params=params,
                                     headers=tenant.headers)).json()
        seen += [item["detail"]["n"] for item in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == [0, 1, 2, 3, 4]
