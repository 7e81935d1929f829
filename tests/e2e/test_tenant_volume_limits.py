"""Once there was no cap on a tenant's volume: six backfill requests wrote 60,000 runs in
1.6 s, and nothing limited a tenant's runs not yet ended nor the rate of its API calls.

Real `cronwire serve` processes (API role only, so the runs stay as the requests left
them) over real HTTP on a real Postgres, configured through the environment as an operator
would: SCHEDULER_TENANT_MAX_PENDING_RUNS and SCHEDULER_API_RATE_PER_SECOND.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest

from cronwire.adapters.postgres.tenants import PostgresTenantStore
from tests.support.replicas import Replica, ReplicaSet

PENDING_LIMIT = 2_500
BACKFILL = 1_000  # occurrences per request (a seconds cron over 1,000 s)
OPEN = "status IN ('pending', 'running', 'retrying')"


@pytest.fixture
async def fleet(database_url: str, tmp_path: Path) -> AsyncIterator[ReplicaSet]:
    async with ReplicaSet(database_url, log_dir=tmp_path) as replicas:
        yield replicas


def _auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _iso(at: datetime) -> str:
    return at.astimezone(UTC).isoformat().replace("+00:00", "Z")


async def _schedule(http: httpx.AsyncClient, base: str, token: str) -> str:
    response = await http.post(f"{base}/v1/schedules", headers=_auth(token), json={
        "name": "every-second", "cron": "* * * * * *",
        "target": {"url": "http://127.0.0.1:9/hook"}})
    assert response.status_code == 201, response.text
    schedule_id: str = response.json()["id"]
    return schedule_id


async def _backfill(http: httpx.AsyncClient, base: str, token: str, schedule_id: str,
                    start: datetime, count: int, *, dry_run: bool = False) -> httpx.Response:
    return await http.post(
        f"{base}/v1/schedules/{schedule_id}/backfill", headers=_auth(token),
        json={"start": _iso(start), "end": _iso(start + timedelta(seconds=count)),
              "dry_run": dry_run}, timeout=60)


def _refusal(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code == 429, response.text
    error: dict[str, Any] = response.json()["error"]
    assert error["code"] == "limit_exceeded"
    return error


async def _open_runs(pool: asyncpg.Pool, tenant: uuid.UUID) -> int:
    count: int = await pool.fetchval(
        f"SELECT count(*) FROM job_run WHERE tenant_id = $1 AND {OPEN}", tenant)
    return count


async def test_concurrent_backfills_on_two_replicas_stop_at_the_pending_limit(
    fleet: ReplicaSet, db_pool: asyncpg.Pool,
) -> None:
    replicas: list[Replica] = await asyncio.gather(*(
        fleet.spawn(name, roles="api", tenant_max_pending_runs=PENDING_LIMIT)
        for name in ("api-a", "api-b")))
    bases = [r.base_url for r in replicas]
    tenants = PostgresTenantStore(db_pool)
    attacker, victim = await tenants.create("attacker"), await tenants.create("victim")
    async with httpx.AsyncClient(timeout=30) as http:
        schedule = await _schedule(http, bases[0], attacker.token)
        victims = await _schedule(http, bases[1], victim.token)
        now = datetime.now(UTC).replace(microsecond=0)
        windows = [now - timedelta(seconds=BACKFILL * (i + 2)) for i in range(6)]

        # The reproduction: six backfills at once, over both replicas.
        answers = await asyncio.gather(*(
            _backfill(http, bases[i % 2], attacker.token, schedule, start, BACKFILL)
            for i, start in enumerate(windows)))
        written = [a for a in answers if a.status_code == 202]
        refused = [_refusal(a) for a in answers if a.status_code != 202]
        assert len(written) == PENDING_LIMIT // BACKFILL  # two fit, the third would not
        assert all(a.json()["created"] == BACKFILL for a in written)
        assert await _open_runs(db_pool, attacker.tenant_id) == len(written) * BACKFILL
        for error in refused:
            assert error["limit"] == "max_pending_runs"
            assert error["message"].startswith("max_pending_runs: ")
            assert (f"would add {BACKFILL}; the limit is {PENDING_LIMIT} "
                    "(SCHEDULER_TENANT_MAX_PENDING_RUNS)") in error["message"]

        # A dry run is answered, and says the real one would be refused. Over a window of
        # its own: which two of the six were written is up to the race, and a dry run over
        # a written one adds nothing (its runs exist), so it was rightly not over the limit.
        dry = await _backfill(http, bases[0], attacker.token, schedule,
                              now - timedelta(seconds=BACKFILL * 8), BACKFILL, dry_run=True)
        assert dry.status_code == 200 and dry.json()["over_limit"] == "max_pending_runs"

        # Filled to the limit exactly; then a trigger is one run too many.
        top_up = await _backfill(http, bases[1], attacker.token, schedule,
                                 now - timedelta(seconds=10 * BACKFILL), 500)
        assert top_up.status_code == 202, top_up.text
        trigger = await http.post(f"{bases[0]}/v1/schedules/{schedule}/trigger",
                                  headers=_auth(attacker.token))
        assert "would add 1; the limit is 2500" in _refusal(trigger)["message"]

        # The victim is not held back by any of it, on either replica.
        assert (await _backfill(http, bases[0], victim.token, victims, windows[0],
                                BACKFILL)).status_code == 202
        assert (await http.post(f"{bases[1]}/v1/schedules/{victims}/trigger",
                                headers=_auth(victim.token))).status_code == 202
        assert await _open_runs(db_pool, attacker.tenant_id) == PENDING_LIMIT


async def test_replays_stop_at_the_tenants_own_limit(
    fleet: ReplicaSet, db_pool: asyncpg.Pool,
) -> None:
    replica = await fleet.spawn("api", roles="api", tenant_max_pending_runs=PENDING_LIMIT)
    tenants = PostgresTenantStore(db_pool)
    attacker = await tenants.create("attacker")
    async with httpx.AsyncClient(base_url=replica.base_url, timeout=30) as http:
        schedule = await _schedule(http, replica.base_url, attacker.token)
        start = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=1)
        assert (await _backfill(http, replica.base_url, attacker.token, schedule, start,
                                30)).status_code == 202
        # 10 of the 30 failed; an operator caps the tenant at 25 runs not yet ended.
        await db_pool.execute(
            "UPDATE job_run SET status = 'failed', finished_at = now() WHERE id IN "
            "(SELECT id FROM job_run WHERE tenant_id = $1 ORDER BY scheduled_for LIMIT 10)",
            attacker.tenant_id)
        await tenants.set_max_pending_runs(attacker.tenant_id, 25)
        failed = [r["id"] for r in await db_pool.fetch(
            "SELECT id FROM job_run WHERE tenant_id = $1 AND status = 'failed' "
            "ORDER BY scheduled_for", attacker.tenant_id)]

        bulk = await http.post("/v1/runs/replay", headers=_auth(attacker.token),
                               json={"status": "failed", "limit": 100})
        error = _refusal(bulk)
        assert "this request would add 10; the limit is 25 (this tenant's own limit" \
            in error["message"]
        for run_id in failed[:5]:  # 20 + 5 = 25
            one = await http.post(f"/v1/runs/{run_id}/replay", headers=_auth(attacker.token))
            assert one.status_code == 202, one.text
        sixth = await http.post(f"/v1/runs/{failed[5]}/replay", headers=_auth(attacker.token))
        assert "at least 25 runs not yet ended" in _refusal(sixth)["message"]
        assert await _open_runs(db_pool, attacker.tenant_id) == 25


async def _get_many(http: httpx.AsyncClient, path: str, count: int,
                    headers: dict[str, str] | None = None) -> list[httpx.Response]:
    return list(await asyncio.gather(*(http.get(path, headers=headers)
                                       for _ in range(count))))


async def test_the_api_rate_limit_answers_429_with_retry_after_per_tenant(
    fleet: ReplicaSet, db_pool: asyncpg.Pool,
) -> None:
    rate = 5  # burst 10
    replica = await fleet.spawn("api", roles="api", api_rate_per_second=rate)
    tenants = PostgresTenantStore(db_pool)
    attacker, victim = await tenants.create("attacker"), await tenants.create("victim")
    async with httpx.AsyncClient(base_url=replica.base_url, timeout=30) as http:
        began = time.monotonic()
        answers = await _get_many(http, "/v1/schedules", 40, _auth(attacker.token))
        elapsed = time.monotonic() - began
        admitted = sum(a.status_code == 200 for a in answers)
        refused = [a for a in answers if a.status_code != 200]
        # The burst, plus what refilled while the 40 requests were answered.
        assert 2 * rate <= admitted <= 2 * rate + rate * elapsed + 1
        assert refused
        for answer in refused:
            error = _refusal(answer)
            assert error["limit"] == "api_rate_per_second"
            assert "more than 5 requests per second (burst 10)" in error["message"]
            assert "SCHEDULER_API_RATE_PER_SECOND" in error["message"]
            retry_after = answer.headers["Retry-After"]
            assert retry_after.isdigit() and int(retry_after) >= 1

        # Another tenant, and the unauthenticated routes, are not held back.
        assert (await http.get("/v1/schedules", headers=_auth(victim.token))).status_code == 200
        for path in ("/healthz", "/readyz", "/metrics", "/console"):
            assert {a.status_code for a in await _get_many(http, path, 30)} == {200}, path
        # Nor is a request without a valid token counted against anyone: it is a 401.
        assert (await http.get("/v1/schedules")).status_code == 401

        await asyncio.sleep(int(refused[-1].headers["Retry-After"]))
        assert (await http.get("/v1/schedules",
                               headers=_auth(attacker.token))).status_code == 200
