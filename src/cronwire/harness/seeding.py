"""Seeding straight in SQL (seeding.sql), for the tests, the benchmarks, `cronwire
loadtest` and `cronwire chaos`.

Connections and pools must come from the composition root (``open_pool``, or the tests'
``create_pool``): their jsonb codec turns the dicts into JSON. Due runs are written the
way the planner would leave them (tenant, schedule, ``pending`` runs with ``fire_after <=
now()``) but in bulk: ``generate_series`` makes 50,000 runs in one statement, under a
schedule with ``next_fire_at = NULL`` that a planner running alongside never fires. The
harnesses' firing schedules are the planner's to fire, from their first instant on.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, TypeAlias, cast

import asyncpg

from cronwire.bootstrap.factories import harness_queries, secret_box
from cronwire.domain.delivery import new_signing_secret
from cronwire.domain.secrets import schedule_header_context, schedule_secret_context
from cronwire.harness.fleet import HARNESS_SECRET_KEYS
from cronwire.ports.secrets import SecretBox

Q = harness_queries(Path(__file__).with_name("seeding.sql"))
DEFAULT_RETRY = {"max_attempts": 3, "initial_backoff_seconds": 0.05, "max_backoff_seconds": 0.2}

Database: TypeAlias = asyncpg.Connection | asyncpg.Pool


@dataclass(frozen=True, slots=True)
class SeededSchedule:
    id: uuid.UUID
    tenant_id: uuid.UUID
    url: str
    signing_secret: str


def _box(db: Database) -> SecretBox:
    """Seeded secrets are sealed as the API seals them (with the harness key ring, which
    every harness replica has), so a seeded database is a real one: the claim opens them."""
    return secret_box(cast(asyncpg.Pool, db), HARNESS_SECRET_KEYS)


async def _sealed_target(box: SecretBox, tenant_id: uuid.UUID, schedule_id: uuid.UUID,
                         target: Mapping[str, Any]) -> dict[str, Any]:
    headers = {name: await box.seal(tenant_id, str(value),
                                    schedule_header_context(schedule_id, name))
               for name, value in (target.get("headers") or {}).items()}
    return {**target, "headers": headers}


async def db_now(db: Database) -> datetime:
    now: datetime = await db.fetchval(Q["seeding_now"])
    return now


async def seed_tenant(db: Database, name: str = "tenant") -> uuid.UUID:
    tenant_id = uuid.uuid4()
    await db.execute(Q["seeding_tenant_insert"], tenant_id, name)
    return tenant_id


async def seed_schedule(
    db: Database,
    tenant_id: uuid.UUID,
    url: str,
    *,
    retry: Mapping[str, Any] | None = None,
    method: str = "POST",
    headers: dict[str, str] | None = None,
    body: str | None = None,
    previous_secret: str | None = None,
) -> SeededSchedule:
    """A schedule the planner never fires, owning the runs :func:`seed_due_runs` writes."""
    schedule_id = uuid.uuid4()
    secret = new_signing_secret()
    box, context = _box(db), schedule_secret_context(schedule_id)
    target = await _sealed_target(box, tenant_id, schedule_id, {
        "url": url, "method": method, "headers": headers or {}, "body": body})
    previous = (None if previous_secret is None
                else await box.seal(tenant_id, previous_secret, context))
    await db.execute(Q["seeding_schedule_insert"], schedule_id, tenant_id, target,
                     retry or DEFAULT_RETRY, await box.seal(tenant_id, secret, context),
                     previous)
    return SeededSchedule(schedule_id, tenant_id, url, secret)


async def seed_flow_control(
    db: Database, schedule: SeededSchedule, key: str, *, max_concurrency: int | None = None,
    rate_per_second: float | None = None, burst: int | None = None,
) -> None:
    """Give ``schedule`` (and its runnable runs) the flow-control ``key`` with these limits;
    runs seeded afterwards count under it too."""
    if rate_per_second is not None and burst is None:
        burst = max(1, math.ceil(rate_per_second))
    flow = {"key": key, "max_concurrency": max_concurrency,
            "rate_per_second": rate_per_second, "burst": burst}
    await db.execute(Q["seeding_flow_control"], schedule.tenant_id, schedule.id, flow, key,
                     max_concurrency, rate_per_second, burst)


async def seed_firing_schedules(
    db: Database, tenant_id: uuid.UUID, count: int, *, cron: str, target: Mapping[str, Any],
    retry: Mapping[str, Any], first: datetime, ends_at: datetime, name: str,
    jitter_seconds: int = 0,
) -> list[uuid.UUID]:
    """``count`` active schedules the planner fires on ``cron`` from ``first`` until
    ``ends_at``, named ``<name><n>``, each with ``jitter_seconds``; returns their ids."""
    ids = [uuid.uuid4() for _ in range(count)]
    box, secret = _box(db), new_signing_secret()
    if target.get("headers"):
        raise ValueError("seed_firing_schedules seals no headers: its target has none")
    sealed = [await box.seal(tenant_id, secret, schedule_secret_context(schedule_id))
              for schedule_id in ids]
    await db.execute(Q["seeding_firing_schedules_insert"], ids, tenant_id, cron, target,
                     retry, first, ends_at, sealed, name, jitter_seconds)
    return ids


async def seed_due_run_ids(
    db: Database, schedule: SeededSchedule | tuple[uuid.UUID, uuid.UUID], count: int, *,
    first: int = 0, due_seconds_ago: float = 1.0, due_at: datetime | None = None,
) -> list[uuid.UUID]:
    """``count`` pending runs of ``schedule`` (a SeededSchedule or ``(tenant id, schedule
    id)``), due ``due_seconds_ago`` before the database's now (negative: in the future) or
    at ``due_at``. Occurrences are 1 ms apart starting one hour ago plus ``first`` ms, so
    several calls with distinct ``first`` never collide on (schedule, scheduled_for)."""
    tenant_id, schedule_id = ((schedule.tenant_id, schedule.id)
                              if isinstance(schedule, SeededSchedule) else schedule)
    rows = await db.fetch(Q["seeding_due_runs_insert"], tenant_id, schedule_id, first, count,
                          due_at, due_seconds_ago)
    return [row["id"] for row in rows]


async def seed_due_runs(
    db: Database, schedule: SeededSchedule, count: int, *, first: int = 0,
    due_seconds_ago: float = 1.0,
) -> int:
    """:func:`seed_due_run_ids`, counted."""
    return len(await seed_due_run_ids(db, schedule, count, first=first,
                                      due_seconds_ago=due_seconds_ago))


async def status_counts(db: Database) -> dict[str, int]:
    rows: Sequence[asyncpg.Record] = await db.fetch(Q["seeding_status_counts"])
    return {row["status"]: row["n"] for row in rows}


async def non_terminal(db: Database) -> int:
    return int(await db.fetchval(Q["seeding_non_terminal"]))
