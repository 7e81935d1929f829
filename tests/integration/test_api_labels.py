"""Names and notes through the API on real Postgres (CONTRACT.md, "Tenant isolation in
depth"): invisible text and Unicode control/format characters are a 422 naming the field
on every label a tenant sets, and a label an older release stored stays readable and does
not fail a change to another field."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from tests.support.api import Api, Tenant, api_fixture, schedule_body  # noqa: F401 - fixture

pytestmark = pytest.mark.asyncio

BAD = ["\u200b", "\u202eevil\u202c", "\u0000", "\u3164", "ok\u2066name", "line\nbreak"]
IDS = ["zero-width-space", "bidi-override", "nul", "hangul-filler", "bidi-isolate", "newline"]


async def _send(api: Api, tenant: Tenant, method: str, url: str,
                body: dict[str, Any]) -> httpx.Response:
    # Sent as JSON escapes, as a client may (httpx would refuse nothing, but be explicit).
    return await api.client.request(method, url, content=json.dumps(body).encode(),
                                    headers={**tenant.headers,
                                             "content-type": "application/json"})


def _names(response: httpx.Response, field: str) -> None:
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["field"] == field and error["message"].startswith(f"{field}: "), error


@pytest.mark.parametrize("bad", BAD, ids=IDS)
async def test_an_invisible_or_controlling_label_is_a_422_naming_its_field(
        api: Api, bad: str) -> None:
    tenant = await api.tenant()
    _names(await _send(api, tenant, "POST", "/v1/schedules", schedule_body(name=bad)), "name")
    _names(await _send(api, tenant, "POST", "/v1/schedules",
                       schedule_body(flow_control={"key": bad})), "flow_control.key")
    created = await api.create_schedule(tenant, flow_control={"key": "billing"})
    url = f"/v1/schedules/{created['id']}"
    _names(await _send(api, tenant, "PATCH", url, {"name": bad}), "name")
    _names(await _send(api, tenant, "PATCH", url, {"flow_control": {"key": bad}}),
           "flow_control.key")
    _names(await _send(api, tenant, "POST", f"{url}/pause", {"note": bad}), "note")
    after = (await api.client.get(url, headers=tenant.headers)).json()
    assert (after["name"], after["flow_control"]["key"], after["status"]) == (
        "nightly-report", "billing", "active")
    assert await api.pool.fetchval("SELECT count(*) FROM schedule") == 1


async def test_ordinary_labels_in_any_script_are_accepted(api: Api) -> None:
    tenant = await api.tenant()
    created = await api.create_schedule(tenant, name="Rapport mensuel · 月次 🙂",
                                        flow_control={"key": "facturación"})
    assert created["name"] == "Rapport mensuel · 月次 🙂"
    paused = await _send(api, tenant, "POST", f"/v1/schedules/{created['id']}/pause",
                         {"note": "wartung bis Montag — é"})
    assert paused.status_code == 200, paused.text
    assert paused.json()["paused_reason"] == "wartung bis Montag — é"


async def test_a_label_stored_before_the_rule_stays_readable_and_editable(api: Api) -> None:
    tenant = await api.tenant()
    created = await api.create_schedule(tenant, flow_control={"key": "billing"})
    url = f"/v1/schedules/{created['id']}"
    # What an older release accepted, written as it would be in an existing database.
    await api.pool.execute(
        "UPDATE schedule SET name = $2, flow_control = jsonb_set(flow_control, '{key}', "
        "to_jsonb($3::text)), paused_reason = $4 WHERE id = $1",
        created["id"], "\u202eevil\u202c", "\u200bbilling", "\u200b")
    read = await api.client.get(url, headers=tenant.headers)
    assert read.status_code == 200, read.text
    assert read.json()["name"] == "\u202eevil\u202c"
    assert read.json()["flow_control"]["key"] == "\u200bbilling"
    listed = await api.client.get("/v1/schedules", headers=tenant.headers)
    assert [s["name"] for s in listed.json()["items"]] == ["\u202eevil\u202c"]
    changed = await _send(api, tenant, "PATCH", url, {"cron": "0 4 * * *"})
    assert changed.status_code == 200, changed.text
    assert (changed.json()["name"], changed.json()["cron"]) == ("\u202eevil\u202c", "0 4 * * *")
    renamed = await _send(api, tenant, "PATCH", url, {"name": "evil, renamed"})
    assert renamed.status_code == 200 and renamed.json()["name"] == "evil, renamed"
