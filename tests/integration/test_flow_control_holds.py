"""ADR 0055: a receiver's Retry-After holds a retry and a flow-control key for at
most min(max_backoff_seconds, 3600) s; a tenant's edit or delete releases what the old
key held; GET /v1/flow-control never answers 500; anything unforeseen is a JSON 500 with a
request id (ADR 0055). Real Postgres, the API in process."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
from fastapi import FastAPI

from cronwire.adapters.postgres.claim_source import PostgresClaimSource
from cronwire.adapters.postgres.run_store import PostgresRunStore
from cronwire.api.errors import install_error_handlers
from tests.support.api import Api, api_fixture, insert_runs  # noqa: F401 - fixture
from tests.support.resolutions import throttled
from tests.support.secrets import secret_box

KEY = "billing-api"
HOUR = timedelta(hours=1)
SLACK = timedelta(seconds=30)


async def _held_schedule(api: Api, tenant: Any, *, max_backoff: float = 86_400.0,
                         retry_after: str = "999999999999") -> dict[str, Any]:
    """A keyed schedule with one due run, delivered once and answered 429 with
    ``retry_after``: its key is held and its run retrying."""
    schedule = await api.create_schedule(
        tenant, flow_control={"key": KEY, "max_concurrency": 5},
        retry={"max_attempts": 5, "initial_backoff_seconds": 1.0,
               "max_backoff_seconds": max_backoff})
    await insert_runs(api.pool, tenant.id, uuid.UUID(schedule["id"]), 1,
                      newest=datetime.now(UTC) - timedelta(seconds=5), step=timedelta(1),
                      statuses=["pending"])
    await api.pool.execute("UPDATE job_run SET flow_key = $1, fire_after = now() "
                           "WHERE schedule_id = $2", KEY, uuid.UUID(schedule["id"]))
    [run] = (await PostgresClaimSource(api.pool, secret_box(api.pool)).claim("replica", 10, 30)).runs
    await PostgresRunStore(api.pool).resolve(
        "replica", [throttled(run, retry_after)])
    return schedule


async def _hold(api: Api, tenant: Any) -> datetime | None:
    held: datetime | None = await api.pool.fetchval(
        "SELECT held_until FROM flow_control WHERE tenant_id = $1 AND key = $2",
        tenant.id, KEY)
    return held


async def test_a_retry_after_of_31700_years_holds_the_key_and_the_retry_an_hour(
        api: Api) -> None:
    tenant = await api.tenant()
    schedule = await _held_schedule(api, tenant)
    now = datetime.now(UTC)
    held = await _hold(api, tenant)
    assert held is not None and now + HOUR - SLACK <= held <= now + HOUR + SLACK
    fire_after = await api.pool.fetchval(
        "SELECT fire_after FROM job_run WHERE schedule_id = $1", uuid.UUID(schedule["id"]))
    assert fire_after <= now + HOUR + SLACK, "the retry waits beyond an hour"
    response = await api.client.get("/v1/flow-control", headers=tenant.headers)
    assert response.status_code == 200, response.text
    [key] = response.json()["items"]
    assert datetime.fromisoformat(key["held_until"]) <= now + HOUR + SLACK


async def test_the_hold_is_no_longer_than_the_schedules_max_backoff(api: Api) -> None:
    tenant = await api.tenant()
    await _held_schedule(api, tenant, max_backoff=60.0,
                         retry_after="Fri, 31 Dec 9999 23:59:59 GMT")
    held = await _hold(api, tenant)
    assert held is not None and held <= datetime.now(UTC) + timedelta(seconds=60) + SLACK


async def test_the_flow_control_read_answers_for_any_stored_hold(api: Api) -> None:
    # A hold written before the hour's rule (the migration brings old ones inside it, and
    # the database refuses one its driver could not read) is shown as at most an hour.
    tenant = await api.tenant()
    await api.create_schedule(tenant, flow_control={"key": KEY, "max_concurrency": 5})
    await api.pool.execute("UPDATE flow_control SET held_until = '9998-12-31' "
                           "WHERE tenant_id = $1 AND key = $2", tenant.id, KEY)
    response = await api.client.get("/v1/flow-control", headers=tenant.headers)
    assert response.status_code == 200, response.text
    [key] = response.json()["items"]
    assert datetime.fromisoformat(key["held_until"]) <= datetime.now(UTC) + HOUR + SLACK


async def test_a_new_key_releases_the_runs_the_old_key_held(api: Api) -> None:
    tenant = await api.tenant()
    schedule = await _held_schedule(api, tenant)
    await api.pool.execute("UPDATE job_run SET fire_after = now() WHERE schedule_id = $1",
                           uuid.UUID(schedule["id"]))
    assert (await PostgresClaimSource(api.pool, secret_box(api.pool)).claim("replica", 10, 30)).runs == ()
    patched = await api.client.patch(f"/v1/schedules/{schedule['id']}", headers=tenant.headers,
                                     json={"flow_control": {"key": "billing-api-v2"}})
    assert patched.status_code == 200, patched.text
    [run] = (await PostgresClaimSource(api.pool, secret_box(api.pool)).claim("replica", 10, 30)).runs
    assert run.flow_key == "billing-api-v2"
    assert await _hold(api, tenant) is None


async def test_new_limits_on_the_same_key_release_its_hold(api: Api) -> None:
    tenant = await api.tenant()
    schedule = await _held_schedule(api, tenant)
    patched = await api.client.patch(f"/v1/schedules/{schedule['id']}", headers=tenant.headers,
                                     json={"flow_control": {"max_concurrency": 2}})
    assert patched.status_code == 200, patched.text
    assert await _hold(api, tenant) is None


async def test_deleting_a_schedule_releases_its_keys_hold_for_the_others(api: Api) -> None:
    tenant = await api.tenant()
    held = await _held_schedule(api, tenant)
    other = await api.create_schedule(tenant, flow_control={"key": KEY, "max_concurrency": 5})
    await insert_runs(api.pool, tenant.id, uuid.UUID(other["id"]), 1,
                      newest=datetime.now(UTC) - timedelta(seconds=5), step=timedelta(1),
                      statuses=["pending"])
    await api.pool.execute("UPDATE job_run SET flow_key = $1, fire_after = now() "
                           "WHERE schedule_id = $2", KEY, uuid.UUID(other["id"]))
    assert (await PostgresClaimSource(api.pool, secret_box(api.pool)).claim("replica", 10, 30)).runs == ()
    deleted = await api.client.delete(f"/v1/schedules/{held['id']}", headers=tenant.headers)
    assert deleted.status_code == 204, deleted.text
    [run] = (await PostgresClaimSource(api.pool, secret_box(api.pool)).claim("replica", 10, 30)).runs
    assert str(run.schedule_id) == other["id"]


async def test_an_unforeseen_error_is_a_json_500_with_a_request_id() -> None:
    app = FastAPI()
    install_error_handlers(app)

    @app.get("/boom")
    async def boom() -> None:
        raise ValueError("year 33715 is out of range")

    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://cronwire") as client:
        response = await client.get("/boom", headers={"X-Request-ID": "req-42"})
        hostile = await client.get("/boom", headers={"X-Request-ID": "a b;<x>"})
    assert response.status_code == 500
    error = response.json()["error"]
    assert (error["code"], error["request_id"]) == ("internal_error", "req-42")
    assert "33715" not in response.text  # the cause goes to the log, not to the caller
    assert response.headers["x-request-id"] == "req-42"
    assert hostile.json()["error"]["request_id"] != "a b;<x>"
