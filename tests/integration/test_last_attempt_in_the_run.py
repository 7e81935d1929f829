"""A run that ends with an attempt keeps that attempt in its own row (migration 0030, ADR
0066): job_run_attempt holds only the attempts a retry or a cancel followed, and the history
shows every attempt as before, through the view run_attempt. Real executor, real Postgres,
real sink on loopback."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import asyncpg
import pytest

from cronwire.adapters.postgres.run_history import PostgresRunHistory
from cronwire.domain.model import RunStatus
from cronwire.harness.sink import Reply, always, by_attempt
from tests.support.executor_harness import OWNER, Harness, executor_harness, running

QUICK_RETRIES = {"max_attempts": 3, "initial_backoff_seconds": 0.01, "max_backoff_seconds": 0.05}


@pytest.fixture
async def harness(db_pool: asyncpg.Pool) -> AsyncIterator[Harness]:
    async with executor_harness(db_pool) as harness:
        yield harness


async def _own_rows(pool: asyncpg.Pool) -> list[tuple[int, str]]:
    rows = await pool.fetch("SELECT attempt, outcome FROM job_run_attempt ORDER BY attempt")
    return [(r["attempt"], r["outcome"]) for r in rows]


async def _detail(harness: Harness, tenant_id: uuid.UUID) -> list[tuple[object, ...]]:
    run_id = await harness.pool.fetchval("SELECT id FROM job_run")
    detail = await PostgresRunHistory(harness.pool).get(tenant_id, run_id)
    assert all(a.run_id == run_id and a.tenant_id == tenant_id for a in detail.attempts)
    assert all(a.finished_at >= a.started_at and a.duration_ms >= 0 for a in detail.attempts)
    return [(a.attempt, a.outcome, a.status_code, a.response_excerpt) for a in detail.attempts]


async def test_a_run_its_first_attempt_ends_writes_no_attempt_row(harness: Harness) -> None:
    schedule = await harness.schedule(10)
    executor, signals, _ = harness.executor()
    async with running(executor):
        await signals.settled.wait_count(10, within=10)
    assert await harness.statuses() == {"succeeded": 10}
    assert await _own_rows(harness.pool) == []  # before migration 0030: ten rows
    shown = await harness.pool.fetch(
        "SELECT a.*, r.finished_at AS run_finished FROM run_attempt a "
        "JOIN job_run r ON r.id = a.run_id AND r.scheduled_for = a.scheduled_for")
    assert len(shown) == 10 and len({a["run_id"] for a in shown}) == 10
    assert {(a["attempt"], a["outcome"], a["status_code"], a["error"], a["response_excerpt"],
             a["claimed_by"], a["tenant_id"]) for a in shown} == {
        (1, "success", 200, None, "ok", OWNER, schedule.tenant_id)}
    # The attempt's own clock (the replica's), not the run's finished_at (the database's).
    assert all(a["started_at"] <= a["finished_at"] for a in shown)
    one = await harness.pool.fetchval("SELECT id FROM job_run LIMIT 1")
    await harness.pool.execute("DELETE FROM job_run WHERE id <> $1", one)
    assert await _detail(harness, schedule.tenant_id) == [(1, "success", 200, "ok")]


async def _one_run_until(harness: Harness, ends: RunStatus) -> uuid.UUID:
    """One run of a schedule with quick retries, delivered until it ends ``ends``; its
    tenant."""
    schedule = await harness.schedule(1, retry=QUICK_RETRIES)
    executor, signals, _ = harness.executor()
    async with running(executor):
        await signals.settled.wait_for(
            lambda items: any(s is ends for _, s in items), within=10)
    return schedule.tenant_id


async def test_the_attempts_a_retry_followed_keep_rows_of_their_own(harness: Harness) -> None:
    harness.sink.behaviour = by_attempt({1: Reply(500, body=b"first"), 2: Reply(502, body=b"second")})
    tenant_id = await _one_run_until(harness, RunStatus.SUCCEEDED)
    assert await _own_rows(harness.pool) == [(1, "http_error"), (2, "http_error")]
    assert await _detail(harness, tenant_id) == [
        (1, "http_error", 500, "first"), (2, "http_error", 502, "second"), (3, "success", 200, "ok")]


async def test_a_failed_run_keeps_its_last_error_in_its_own_row(harness: Harness) -> None:
    harness.sink.behaviour = always(Reply(500, body=b"boom"))
    tenant_id = await _one_run_until(harness, RunStatus.FAILED)
    assert await _own_rows(harness.pool) == [(1, "http_error"), (2, "http_error")]
    assert await _detail(harness, tenant_id) == [
        (n, "http_error", 500, "boom") for n in (1, 2, 3)]
    errors = await harness.pool.fetch("SELECT attempt, error FROM run_attempt ORDER BY attempt")
    assert [r["attempt"] for r in errors] == [1, 2, 3] and all(r["error"] for r in errors)


async def test_a_run_ended_before_the_migration_shows_its_attempt_once(
        harness: Harness) -> None:
    """Its final attempt is a row of job_run_attempt and last_outcome is NULL: the view
    does not show that attempt a second time from the run's row."""
    schedule = await harness.schedule(1)
    run = await harness.pool.fetchrow("SELECT id, scheduled_for FROM job_run")
    await harness.pool.execute(
        """INSERT INTO job_run_attempt (run_id, scheduled_for, tenant_id, attempt, started_at,
               finished_at, outcome, status_code, error, duration_ms, response_excerpt,
               claimed_by)
           VALUES ($1, $2, $3, 1, now(), now(), 'success', 200, NULL, 3, 'old', 'replica-a')""",
        run["id"], run["scheduled_for"], schedule.tenant_id)
    await harness.pool.execute(
        "UPDATE job_run SET status = 'succeeded', attempt_count = 1, last_status_code = 200, "
        "last_duration_ms = 3, claimed_by = 'replica-a', finished_at = now()")
    assert await _detail(harness, schedule.tenant_id) == [(1, "success", 200, "old")]
