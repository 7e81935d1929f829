"""The run history routes over real Postgres: order, filters, keyset pagination (also
while a planner and a writer change the table underneath), and run detail with evidence."""

from __future__ import annotations

import asyncio
import functools
import itertools
import random
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import asyncpg
import pytest

from cronwire.adapters.metrics import PrometheusMetrics
from cronwire.adapters.postgres.planner_store import PostgresPlannerStore
from cronwire.service.planner import Planner
from tests.support.api import Api, Tenant, api_fixture, insert_runs  # noqa: F401 - fixture

pytestmark = pytest.mark.asyncio
Key = tuple[datetime, uuid.UUID]


def parse_time(text: str) -> datetime:
    assert text.endswith("Z"), text
    return datetime.fromisoformat(text)


def key_of(item: dict[str, Any]) -> Key:
    return parse_time(item["scheduled_for"]), uuid.UUID(item["id"])


async def page_all(api: Api, tenant: Tenant, limit: int, **params: Any) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    cursor: str | None = None
    for _ in range(10_000):
        query = {"limit": limit, **params, **({"cursor": cursor} if cursor else {})}
        response = await api.client.get("/v1/runs", params=query, headers=tenant.headers)
        assert response.status_code == 200, response.text
        page = response.json()
        assert len(page["items"]) <= limit
        items += page["items"]
        cursor = page["next_cursor"]
        if cursor is None:
            return items
    raise AssertionError("pagination did not end")


async def expected_keys(pool: asyncpg.Pool, where: str, *args: object) -> list[Key]:
    rows = await pool.fetch(
        f"SELECT scheduled_for, id FROM job_run WHERE {where} "
        "ORDER BY scheduled_for DESC, id DESC", *args)
    return [(r["scheduled_for"], r["id"]) for r in rows]


@pytest.fixture
async def history(api: Api) -> tuple[Tenant, uuid.UUID, uuid.UUID, datetime]:
    """Two schedules of one tenant; B's runs share instants with A's (ties on
    scheduled_for broken by id), spread over the last 40 minutes."""
    tenant = await api.tenant()
    a = uuid.UUID((await api.create_schedule(tenant, name="a"))["id"])
    b = uuid.UUID((await api.create_schedule(tenant, name="b"))["id"])
    newest: datetime = await api.pool.fetchval("SELECT date_trunc('minute', now())")
    await insert_runs(api.pool, tenant.id, a, 40, newest=newest, step=timedelta(minutes=1))
    await insert_runs(api.pool, tenant.id, b, 20, newest=newest, step=timedelta(minutes=2),
                      statuses=["failed", "succeeded"])
    return tenant, a, b, newest


async def test_history_is_newest_first_and_pages_cover_it_exactly(
    api: Api, history: tuple[Tenant, uuid.UUID, uuid.UUID, datetime]
) -> None:
    tenant, *_ = history
    expected = await expected_keys(api.pool, "tenant_id = $1", tenant.id)
    assert len(expected) == 60
    for limit in (1, 7, 20, 200):
        assert [key_of(i) for i in await page_all(api, tenant, limit)] == expected, limit
    first = (await api.client.get("/v1/runs", headers=tenant.headers)).json()
    assert len(first["items"]) == 50 and first["next_cursor"] is not None  # default limit
    item = first["items"][0]
    assert set(item) == {"id", "schedule_id", "scheduled_for", "status", "attempt_count",
                         "fire_after", "first_attempt_at", "finished_at", "last_status_code",
                         "last_error", "trigger", "skip_reason", "replay_of",
                         "replayed_by"}
    assert item["trigger"] == "schedule" and item["scheduled_for"].endswith("Z")


async def test_filters_by_schedule_status_and_window(
    api: Api, history: tuple[Tenant, uuid.UUID, uuid.UUID, datetime]
) -> None:
    tenant, a, b, newest = history
    by_a = await page_all(api, tenant, 9, schedule_id=str(a))
    assert [key_of(i) for i in by_a] == await expected_keys(
        api.pool, "schedule_id = $1", a)
    failed = await page_all(api, tenant, 4, status="failed")
    assert [key_of(i) for i in failed] == await expected_keys(
        api.pool, "tenant_id = $1 AND status = 'failed'", tenant.id)
    assert {i["schedule_id"] for i in failed} == {str(a), str(b)}
    failed_b = await page_all(api, tenant, 3, schedule_id=str(b), status="failed")
    assert len(failed_b) == 10 and all(i["status"] == "failed" for i in failed_b)

    # since is inclusive, until exclusive; bounds sit exactly on occurrences.
    since, until = newest - timedelta(minutes=10), newest - timedelta(minutes=2)
    window = await page_all(api, tenant, 5, since=since.isoformat(), until=until.isoformat())
    times = [key_of(i)[0] for i in window]
    assert max(times) == newest - timedelta(minutes=3) and min(times) == since
    assert [key_of(i) for i in window] == await expected_keys(
        api.pool, "tenant_id = $1 AND scheduled_for >= $2 AND scheduled_for < $3",
        tenant.id, since, until)
    in_a = await page_all(api, tenant, 2, schedule_id=str(a), since=since.isoformat(),
                          until=until.isoformat(), status="pending")
    assert all(i["status"] == "pending" and since <= key_of(i)[0] < until for i in in_a)
    assert len(in_a) == len(await expected_keys(
        api.pool, "schedule_id = $1 AND status = 'pending' AND scheduled_for >= $2 "
        "AND scheduled_for < $3", a, since, until))
    unknown = await api.client.get("/v1/runs", params={"schedule_id": str(uuid.uuid4())},
                                   headers=tenant.headers)
    assert unknown.json() == {"items": [], "next_cursor": None}


async def test_run_detail_carries_its_attempt_evidence(api: Api) -> None:
    tenant = await api.tenant()
    created = await api.create_schedule(tenant)
    run = (await api.client.post(f"/v1/schedules/{created['id']}/trigger",
                                 headers=tenant.headers)).json()
    run_id, at = uuid.UUID(run["id"]), parse_time(run["scheduled_for"])
    await api.pool.execute(
        """INSERT INTO job_run_attempt (run_id, scheduled_for, tenant_id, attempt, started_at,
               finished_at, outcome, status_code, error, duration_ms, response_excerpt,
               claimed_by)
           VALUES ($1, $2, $3, 2, now(), now() + interval '40 ms', 'success', 200, NULL, 40,
                   '{"ok":true}', 'replica-a'),
                  ($1, $2, $3, 1, now() - interval '10 s', now() - interval '9 s',
                   'http_error', 503, 'HTTP 503 Service Unavailable', 1000, 'busy', 'replica-a')""",
        run_id, at, tenant.id)
    await api.pool.execute(
        "UPDATE job_run SET status = 'succeeded', attempt_count = 2, last_status_code = 200, "
        "first_attempt_at = now() - interval '10 s', finished_at = now() WHERE id = $1", run_id)
    response = await api.client.get(f"/v1/runs/{run_id}", headers=tenant.headers)
    assert response.status_code == 200, response.text
    detail = response.json()
    assert detail["status"] == "succeeded" and detail["attempt_count"] == 2
    assert detail["trigger"] == "manual" and detail["last_status_code"] == 200
    assert [a["attempt"] for a in detail["attempts"]] == [1, 2]
    first, second = detail["attempts"]
    assert (first["outcome"], first["status_code"], first["error"], first["duration_ms"],
            first["response_excerpt"]) == ("http_error", 503, "HTTP 503 Service Unavailable",
                                           1000, "busy")
    assert (second["outcome"], second["status_code"], second["response_excerpt"]) == (
        "success", 200, '{"ok":true}')
    assert parse_time(second["finished_at"]) > parse_time(second["started_at"])
    without = (await api.client.get("/v1/runs", headers=tenant.headers)).json()["items"][0]
    assert "attempts" not in without and without["id"] == str(run_id)
    missing = await api.client.get(f"/v1/runs/{uuid.uuid4()}", headers=tenant.headers)
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"


async def test_run_detail_finds_runs_in_older_partitions(api: Api) -> None:
    tenant = await api.tenant()
    sid = uuid.UUID((await api.create_schedule(tenant))["id"])
    last_month: datetime = await api.pool.fetchval(
        "SELECT date_trunc('month', now()) - interval '20 days'")
    await insert_runs(api.pool, tenant.id, sid, 1, newest=last_month, step=timedelta(0))
    item = (await api.client.get("/v1/runs", headers=tenant.headers)).json()["items"][0]
    assert key_of(item)[0] == last_month
    assert (await api.client.get(f"/v1/runs/{item['id']}", headers=tenant.headers)).json()[
        "attempts"] == []


@dataclass
class Pager:
    fetches_started: int = 0
    cursor: Key | None = None
    page_index: int = 0
    more: bool = True  # whether a page follows page_index


@dataclass
class Writer:
    steps: int = 0
    below_must_appear: set[uuid.UUID] = field(default_factory=set)
    below_maybe: set[uuid.UUID] = field(default_factory=set)
    above: set[uuid.UUID] = field(default_factory=set)
    updated: int = 0
    # Pages after which a row below the cursor committed before the next page was asked
    # for: the pager waits for its page to be here, so every page is tested, however
    # slowly the machine runs the two tasks.
    pages_written: set[int] = field(default_factory=set)


async def _backfill(pool: asyncpg.Pool, tenant_id: uuid.UUID, schedule: uuid.UUID,
                    at: datetime) -> uuid.UUID | None:
    run_id = uuid.uuid4()
    inserted = await pool.fetchval(
        """INSERT INTO job_run (id, tenant_id, schedule_id, scheduled_for, idempotency_key,
                                fire_after, status)
           VALUES ($1, $2, $3, $4, 'backfill', $4, 'succeeded')
           ON CONFLICT DO NOTHING RETURNING id""", run_id, tenant_id, schedule, at)
    return run_id if inserted else None


async def _write_while_paging(pool: asyncpg.Pool, tenant_id: uuid.UUID,
                              schedules: list[uuid.UUID], pager: Pager, writer: Writer,
                              done: asyncio.Event) -> None:
    """Updates random runs and inserts rows just below and just above the pager's cursor,
    noting which inserts committed before the next page was requested."""
    rng = random.Random(7)
    while not done.is_set() and writer.steps < 2000:
        page, cursor, more = pager.page_index, pager.cursor, pager.more
        status = await pool.execute(
            """UPDATE job_run SET status = $2, attempt_count = least(attempt_count + 1, 8),
                      updated_at = now()
               WHERE tenant_id = $1 AND id IN (
                   SELECT id FROM job_run WHERE tenant_id = $1 ORDER BY random() LIMIT 25)""",
            tenant_id, rng.choice(["succeeded", "failed", "running", "retrying"]))
        writer.updated += int(status.split()[-1])
        if cursor is not None:
            nudge = timedelta(microseconds=rng.randrange(1, 999_999))
            below = await _backfill(pool, tenant_id, rng.choice(schedules), cursor[0] - nudge)
            if below is not None:
                before_next_page = more and pager.fetches_started == page
                (writer.below_must_appear if before_next_page else writer.below_maybe).add(below)
                if before_next_page:
                    writer.pages_written.add(page)
            above = await _backfill(pool, tenant_id, rng.choice(schedules), cursor[0] + nudge)
            if above is not None:
                writer.above.add(above)
        writer.steps += 1


def _wrote_below(writer: Writer, page: int) -> bool:
    return page in writer.pages_written


async def _until(condition: Any, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.01)


async def test_pages_stay_exact_while_a_planner_and_a_writer_change_the_table(api: Api) -> None:
    tenant = await api.tenant()
    schedules = [uuid.UUID((await api.create_schedule(tenant, name=f"s{i}", cron="* * * * * *",
                                                      timezone="UTC"))["id"])
                 for i in range(20)]
    newest: datetime = await api.pool.fetchval("SELECT date_trunc('second', now())")
    for i, sid in enumerate(schedules):
        await insert_runs(api.pool, tenant.id, sid, 100,
                          newest=newest - timedelta(milliseconds=37 * i), step=timedelta(seconds=17))
    existing = {r["id"] for r in await api.pool.fetch(
        "SELECT id FROM job_run WHERE tenant_id = $1", tenant.id)}
    assert len(existing) == 2000

    planner = Planner(PostgresPlannerStore(api.pool), PrometheusMetrics(), batch=500,
                      tick_seconds=0.05, lookahead_seconds=5)
    pager, writer, done = Pager(), Writer(), asyncio.Event()
    planner_task = asyncio.create_task(planner.run(done))
    writer_task = asyncio.create_task(
        _write_while_paging(api.pool, tenant.id, schedules, pager, writer, done))
    try:
        await _until(lambda: planner.runs_inserted > 0, 10, "the planner's first runs")
        planned_before_paging = planner.runs_inserted
        seen: list[dict[str, Any]] = []
        cursor: str | None = None
        while True:
            pager.fetches_started += 1
            query = {"limit": 50, **({"cursor": cursor} if cursor else {})}
            response = await api.client.get("/v1/runs", params=query, headers=tenant.headers)
            assert response.status_code == 200, response.text
            page = response.json()
            seen += page["items"]
            if page["items"]:
                pager.cursor = key_of(page["items"][-1])
            cursor = page["next_cursor"]
            pager.more = cursor is not None
            pager.page_index = pager.fetches_started
            if cursor is None:
                break
            await _until(functools.partial(_wrote_below, writer, pager.page_index), 30,
                         "a write below the cursor between pages")
            if pager.page_index == 20:  # and the planner has written mid-way through
                await _until(lambda: planner.runs_inserted > planned_before_paging, 10,
                             "a planner write while paging")
    finally:
        done.set()
        await asyncio.wait_for(asyncio.gather(planner_task, writer_task), 30)

    ids = [uuid.UUID(i["id"]) for i in seen]
    keys = [key_of(i) for i in seen]
    assert len(ids) == len(set(ids)), "a row appeared on two pages"
    assert all(a > b for a, b in itertools.pairwise(keys)), "order not strictly descending"
    missing = existing - set(ids)
    assert not missing, f"{len(missing)} rows that existed before paging were skipped"
    assert writer.below_must_appear <= set(ids)
    assert not writer.above & set(ids)
    assert pager.page_index >= 40 and writer.steps >= pager.page_index - 1
    assert len(writer.below_must_appear) >= 20 and writer.updated > 0
    assert planner.runs_inserted > planned_before_paging
