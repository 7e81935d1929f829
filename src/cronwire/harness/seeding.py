"""Seeding due runs directly in SQL, for executor tests and benchmarks.

Connections must come from ``cronwire.adapters.postgres.pool.create_pool`` (its jsonb
codec turns the dicts into JSON). Rows are written the way the planner would leave them (tenant, schedule, ``pending`` runs
with ``fire_after <= now()``) but in bulk: ``generate_series`` makes 50,000 runs in one
statement. Schedules get ``next_fire_at = NULL`` so a planner running alongside never
materialises more runs for them.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import asyncpg

from cronwire.domain.delivery import new_signing_secret

DEFAULT_RETRY = {"max_attempts": 3, "initial_backoff_seconds": 0.05, "max_backoff_seconds": 0.2}

NON_TERMINAL = ("pending", "running", "retrying")


@dataclass(frozen=True, slots=True)
class SeededSchedule:
    id: uuid.UUID
    tenant_id: uuid.UUID
    url: str
    signing_secret: str


async def seed_tenant(conn: asyncpg.Connection, name: str = "tenant") -> uuid.UUID:
    tenant_id = uuid.uuid4()
    await conn.execute("INSERT INTO tenant (id, name) VALUES ($1, $2)", tenant_id, name)
    return tenant_id


async def seed_schedule(
    conn: asyncpg.Connection,
    tenant_id: uuid.UUID,
    url: str,
    *,
    retry: dict[str, Any] | None = None,
    method: str = "POST",
    headers: dict[str, str] | None = None,
    body: str | None = None,
    previous_secret: str | None = None,
) -> SeededSchedule:
    schedule_id = uuid.uuid4()
    secret = new_signing_secret()
    target = {"url": url, "method": method, "headers": headers or {}, "body": body}
    await conn.execute(
        """INSERT INTO schedule (id, tenant_id, name, cron, target, retry, signing_secret,
                                 previous_signing_secret, previous_secret_expires_at,
                                 next_fire_at)
           VALUES ($1, $2, 'seeded', '* * * * *', $3::jsonb, $4::jsonb, $5, $6,
                   CASE WHEN $6::text IS NULL THEN NULL ELSE now() + interval '1 day' END,
                   NULL)""",
        schedule_id, tenant_id, target, retry or DEFAULT_RETRY,
        secret, previous_secret,
    )
    return SeededSchedule(schedule_id, tenant_id, url, secret)


async def seed_due_runs(
    conn: asyncpg.Connection,
    schedule: SeededSchedule,
    count: int,
    *,
    first: int = 0,
    due_seconds_ago: float = 1.0,
) -> int:
    """``count`` pending runs of ``schedule``, due ``due_seconds_ago`` (negative: in the
    future). Occurrences are 1 ms apart starting one hour ago plus ``first`` ms, so
    several calls with distinct ``first`` never collide on (schedule, scheduled_for)."""
    status = await conn.execute(
        """INSERT INTO job_run (id, tenant_id, schedule_id, scheduled_for, idempotency_key,
                                status, fire_after)
           SELECT md5($2::uuid::text || '/' || g::text)::uuid, $1, $2::uuid,
                  date_trunc('second', now()) - interval '1 hour' + g * interval '1 millisecond',
                  'msg_' || md5($2::uuid::text || '/' || g::text),
                  'pending', now() - make_interval(secs => $5)
             FROM generate_series($3::integer, $3::integer + $4::integer - 1) AS g""",
        schedule.tenant_id, schedule.id, first, count, due_seconds_ago,
    )
    return int(status.rsplit(" ", 1)[-1])


async def status_counts(conn: asyncpg.Connection) -> dict[str, int]:
    rows = await conn.fetch("SELECT status, count(*) AS n FROM job_run GROUP BY status")
    return {row["status"]: row["n"] for row in rows}


async def non_terminal(conn: asyncpg.Connection) -> int:
    value = await conn.fetchval(
        "SELECT count(*) FROM job_run WHERE status = ANY($1::text[])", list(NON_TERMINAL)
    )
    return int(value)
