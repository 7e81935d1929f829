"""Alerts end to end, over real replicas: transitions decided once across three of them,
delivered durably to a receiver that fails first, signed with the alert secret (verified
by the standardwebhooks package), with every attempt recorded; and late noticed by a
replica that runs no executor at all."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import asyncpg
import httpx
from standardwebhooks.webhooks import Webhook

from cronwire.adapters.postgres.tenants import PostgresTenantStore
from cronwire.harness.sink import Arrival, Reply, Sink, by_attempt
from tests.support.replicas import ReplicaSet

FAST_ALERTS = {"alert_check_seconds": 0.2, "alert_retry_initial_seconds": 0.2}


def _failing_then_recovering_then_slow(failures: int, fast: int) -> Callable[[Arrival], Reply]:
    """Runs 1..failures answer 500; the next ``fast`` 200 at once; the rest 200 slowly."""
    seen: list[str] = []

    def behaviour(arrival: Arrival) -> Reply:
        if arrival.webhook_id not in seen:
            seen.append(arrival.webhook_id)
        n = seen.index(arrival.webhook_id) + 1
        if n <= failures:
            return Reply(status=500)
        return Reply(status=200) if n <= failures + fast else Reply(status=200, delay=0.4)

    return behaviour


async def _token(pool: asyncpg.Pool) -> tuple[str, dict[str, str]]:
    issued = await PostgresTenantStore(pool).create("alerts")
    return str(issued.tenant_id), {"Authorization": f"Bearer {issued.token}"}


def _verified(arrival: Arrival, secret: str) -> dict[str, Any]:
    payload: dict[str, Any] = Webhook(secret).verify(arrival.body, dict(arrival.headers))
    return payload


async def test_each_transition_is_one_signed_event_across_three_replicas(
    db_pool: asyncpg.Pool, database_url: str, tmp_path: Path
) -> None:
    target = Sink(behaviour=_failing_then_recovering_then_slow(failures=4, fast=3))
    # The alert receiver fails every event's first attempt: delivered on the retry.
    receiver = Sink(behaviour=by_attempt({1: Reply(status=503)}, Reply(status=204)))
    async with target, receiver, ReplicaSet(database_url, log_dir=tmp_path) as fleet:
        tenant_id, headers = await _token(db_pool)
        api = await fleet.spawn("r1", roles="api,planner,executor", **FAST_ALERTS)
        for name in ("r2", "r3"):
            await fleet.spawn(name, roles="planner,executor", **FAST_ALERTS)
        async with httpx.AsyncClient(base_url=api.base_url, headers=headers) as client:
            put = await client.put("/v1/alerts", json={"url": receiver.url})
            assert put.status_code == 200, put.text
            secret = put.json()["signing_secret"]
            assert put.json()["events"] == ["schedule.failing", "schedule.recovered",
                                            "schedule.late", "schedule.slow", "schedule.paused"]
            assert "signing_secret" not in (await client.get("/v1/alerts")).json()
            created = await client.post("/v1/schedules", json={
                "name": "flaky", "cron": "* * * * * *", "target": {"url": target.url},
                "retry": {"max_attempts": 1},
                "alerts": {"after_failures": 2, "max_duration_ms": 250}})
            assert created.status_code == 201, created.text
            schedule = created.json()
            assert schedule["alerts"] == {"after_failures": 2, "late_after_seconds": None,
                                          "max_duration_ms": 250}

            def delivered(types: set[str]) -> Callable[[Sink], bool]:
                return lambda s: types <= {json.loads(a.body)["type"] for a in s.arrivals
                                           if a.status == 204}

            await receiver.wait_for(delivered({"schedule.failing", "schedule.recovered",
                                               "schedule.slow"}), within=90)
            # Five more runs after the slow one: transitions that would repeat had their
            # chance (every run is slow now, failures are over).
            settled = len(target.acknowledged) + 5
            await target.wait_for(lambda s: len(s.acknowledged) >= settled, within=60)
            await client.post(f"/v1/schedules/{schedule['id']}/pause")
            page = (await client.get("/v1/alerts/events", params={"limit": 200})).json()

    types = Counter(item["type"] for item in page["items"])
    assert types == {"schedule.failing": 1, "schedule.recovered": 1, "schedule.slow": 1}
    rows = await db_pool.fetch("SELECT type, count(*) AS n FROM alert_event GROUP BY type")
    assert {r["type"]: r["n"] for r in rows} == dict(types)
    for item in page["items"]:
        assert item["status"] == "delivered" and item["attempt_count"] == 2
        assert [a["status_code"] for a in item["attempts"]] == [503, 204]
        assert item["attempts"][0]["outcome"] == "http_error"
        assert item["schedule_id"] == schedule["id"] and item["schedule_name"] == "flaky"
    by_type = {item["type"]: item for item in page["items"]}
    assert by_type["schedule.failing"]["detail"]["consecutive_failures"] == 2
    assert by_type["schedule.failing"]["detail"]["last_status_code"] == 500
    assert by_type["schedule.slow"]["detail"]["duration_ms"] > 250
    # Every delivery, first attempts too, carries a signature the package verifies, and
    # the body the contract names; one webhook-id per event across its attempts.
    for arrival in receiver.arrivals:
        body = _verified(arrival, secret)
        assert set(body) >= {"type", "tenant_id", "schedule_id", "schedule_name", "at",
                             "detail", "run_id"}
        assert body["tenant_id"] == tenant_id
        event = by_type[body["type"]]
        assert arrival.webhook_id == "msg_" + event["id"].replace("-", "")
        assert body["run_id"] == event["run_id"]
    assert len(receiver.arrivals) == 2 * len(types)


async def test_late_is_noticed_by_a_replica_without_planner_or_executor(
    db_pool: asyncpg.Pool, database_url: str, tmp_path: Path
) -> None:
    async with Sink() as receiver, ReplicaSet(database_url, log_dir=tmp_path) as fleet:
        _, headers = await _token(db_pool)
        # Three api-only replicas: nothing plans or delivers, every one checks lateness.
        replicas = [await fleet.spawn(f"api{i}", roles="api", **FAST_ALERTS) for i in range(3)]
        async with httpx.AsyncClient(base_url=replicas[0].base_url, headers=headers) as client:
            assert (await client.put("/v1/alerts", json={
                "url": receiver.url, "events": ["schedule.late"]})).status_code == 200
            created = await client.post("/v1/schedules", json={
                "name": "unattended", "cron": "* * * * * *", "target": {"url": receiver.url},
                "alerts": {"late_after_seconds": 1, "after_failures": 1}})
            assert created.status_code == 201, created.text
            await receiver.wait_for(lambda s: len(s.acknowledged) >= 1, within=60)
            await client.post(f"/v1/schedules/{created.json()['id']}/pause")
            page = (await client.get("/v1/alerts/events")).json()
    # (Exactly once under concurrent checks: tests/integration/test_alert_transitions.py.)
    [event] = page["items"]
    assert event["type"] == "schedule.late" and event["status"] == "delivered"
    assert event["detail"]["planned"] is False and event["detail"]["late_after_seconds"] == 1
    assert event["run_id"] is None
