"""PlannerStore on Postgres: one transaction, three round trips, whatever the batch size.

claim (``FOR UPDATE SKIP LOCKED``) -> the job_run partition bounds -> pure ``decide`` -> one
``unnest`` insert of every run -> one ``unnest`` update of every cursor. asyncpg prepares and caches each statement per
connection, so a busy planner parses nothing after its first tick.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from datetime import datetime

import asyncpg

from cronwire.adapters.postgres.driver_errors import storage_errors
from cronwire.adapters.postgres.sql import queries, rows_affected
from cronwire.domain.model import (
    DueSchedule,
    MisfirePolicy,
    PlanDecision,
    idempotency_key_for,
)
from cronwire.domain.planning import Span, writable_span

Q = queries()
log = logging.getLogger(__name__)
Decide = Callable[[Sequence[DueSchedule], datetime, Span | None], PlanDecision]


def _due_schedule(row: asyncpg.Record) -> DueSchedule:
    return DueSchedule(
        id=row["id"],
        tenant_id=row["tenant_id"],
        cron=row["cron"],
        timezone=row["timezone"],
        misfire_policy=MisfirePolicy(row["misfire_policy"]),
        catchup_window_seconds=row["catchup_window_seconds"],
        next_fire_at=row["next_fire_at"],
        last_fire_at=row["last_fire_at"],
        starts_at=row["starts_at"],
        ends_at=row["ends_at"],
    )


class PostgresPlannerStore:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def plan_due(
        self, *, limit: int, lookahead_seconds: float, decide: Decide
    ) -> tuple[int, int]:
        with storage_errors("planner transaction"):
            async with self._pool.acquire() as conn, conn.transaction():
                return await self.plan_on(
                    conn, limit=limit, lookahead_seconds=lookahead_seconds, decide=decide
                )

    async def plan_on(
        self,
        conn: asyncpg.Connection,
        *,
        limit: int,
        lookahead_seconds: float,
        decide: Decide,
    ) -> tuple[int, int]:
        """The planner's statements on ``conn``, which must already be in a transaction.

        Public so a crash test can hold the transaction open after the writes; runtime
        code goes through :meth:`plan_due`. Driver errors are not translated here.
        """
        rows = await conn.fetch(Q["schedule_claim_due"], float(lookahead_seconds), limit)
        if not rows:
            return 0, 0
        db_now = rows[0]["db_now"]
        # Read in the same transaction as the insert: retention cannot drop a partition
        # under it (DETACH waits for this transaction's lock on job_run).
        bounds = await conn.fetch(Q["job_run_partition_bounds"])
        writable = writable_span(((b["lower_bound"], b["upper_bound"]) for b in bounds), db_now)
        if writable is None:
            log.error("no job_run partition holds %s: nothing can be planned until the "
                      "partition keeper creates one (cronwire partitions maintain)", db_now)
        decision = decide([_due_schedule(row) for row in rows], db_now, writable)
        inserted = 0
        if decision.runs:
            status = await conn.execute(Q["job_run_insert_planned"], *_run_columns(decision))
            inserted = rows_affected(status)
        if decision.advances:
            await conn.execute(Q["schedule_advance"], *_advance_columns(decision))
        return len(rows), inserted

    async def db_now(self) -> datetime:
        with storage_errors("read the database clock"):
            now: datetime = await self._pool.fetchval(Q["database_now"])
        return now


def _run_columns(decision: PlanDecision) -> tuple[list[object], ...]:
    """The runs as parallel arrays, the shape ``unnest`` takes (one array per column)."""
    ids: list[object] = []
    tenants: list[object] = []
    schedules: list[object] = []
    times: list[object] = []
    keys: list[object] = []
    triggers: list[object] = []
    statuses: list[object] = []
    for run in decision.runs:
        run_id = run.id  # a uuid5 digest: compute it once per run
        ids.append(run_id)
        tenants.append(run.tenant_id)
        schedules.append(run.schedule_id)
        times.append(run.scheduled_for)
        keys.append(idempotency_key_for(run_id))
        triggers.append(run.trigger.value)
        statuses.append(run.status.value)
    return ids, tenants, schedules, times, keys, triggers, statuses


def _advance_columns(decision: PlanDecision) -> tuple[list[object], ...]:
    advances = decision.advances
    return (
        [a.schedule_id for a in advances],
        [a.next_fire_at for a in advances],
        [a.last_fire_at for a in advances],
    )
