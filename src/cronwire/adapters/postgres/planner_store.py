"""PlannerStore on Postgres: one transaction, three round trips, whatever the batch size.

claim (``FOR UPDATE SKIP LOCKED``) -> the job_run partition bounds -> pure ``decide`` -> one
``unnest`` insert of every run -> one ``unnest`` update of every cursor. asyncpg prepares and caches each statement per
connection, so a busy planner parses nothing after its first tick.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

import asyncpg

from cronwire.adapters.postgres.driver_errors import storage_errors
from cronwire.adapters.postgres.sql import queries, rows_affected
from cronwire.domain.calendars import NO_EXCLUSIONS, CalendarPolicy, Exclusions
from cronwire.domain.model import (
    IDEMPOTENCY_KEY_PREFIX,
    DueSchedule,
    MisfirePolicy,
    OverlapPolicy,
    PlanDecision,
    run_id_hexes,
)
from cronwire.domain.planning import Span, writable_span

Q = queries()
log = logging.getLogger(__name__)
Decide = Callable[[Sequence[DueSchedule], datetime, Span | None], PlanDecision]


# A dict lookup instead of MisfirePolicy(text): the enum call is ~1 µs per claimed row.
_POLICIES = {policy.value: policy for policy in MisfirePolicy}
_OVERLAPS = {policy.value: policy for policy in OverlapPolicy}


def _due_schedule(row: asyncpg.Record, exclusions: Exclusions = NO_EXCLUSIONS) -> DueSchedule:
    return DueSchedule(
        id=row["id"],
        tenant_id=row["tenant_id"],
        cron=row["cron"],
        timezone=row["timezone"],
        misfire_policy=_POLICIES[row["misfire_policy"]],
        catchup_window_seconds=row["catchup_window_seconds"],
        next_fire_at=row["next_fire_at"],
        last_fire_at=row["last_fire_at"],
        starts_at=row["starts_at"],
        ends_at=row["ends_at"],
        at=row["run_at"],
        overlap_policy=_OVERLAPS[row["overlap_policy"]],
        jitter_seconds=row["jitter_seconds"],
        max_runs=row["max_runs"],
        runs_planned=row["runs_planned"],
        exclusions=exclusions,
        resumed_at=row["resumed_at"],
    )


async def _exclusions(conn: asyncpg.Connection,
                      rows: Sequence[asyncpg.Record]) -> dict[Any, Exclusions]:
    """Each claimed schedule's excluded dates, by schedule id, read in one statement
    (none when no schedule of the batch has a calendar). A calendar of another tenant
    is never applied, and one deleted meanwhile is left out (its delete re-checks)."""
    ids = {cid for row in rows for cid in row["exclude_calendars"]}
    if not ids:
        return {}
    calendars = {c["id"]: c for c in await conn.fetch(Q["calendar_dates_of"], list(ids))}
    made: dict[tuple[Any, ...], Exclusions] = {}
    found: dict[Any, Exclusions] = {}
    for row in rows:
        if not row["exclude_calendars"]:
            continue
        own = [calendars[c] for c in row["exclude_calendars"]
               if c in calendars and calendars[c]["tenant_id"] == row["tenant_id"]]
        key = (row["calendar_policy"], *(c["id"] for c in own))
        if key not in made:
            made[key] = Exclusions.of(CalendarPolicy(row["calendar_policy"]),
                                      ((c["name"], c["dates"]) for c in own))
        found[row["id"]] = made[key]
    return found


class PostgresPlannerStore:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def plan_due(
        self, *, limit: int, lookahead_seconds: float, decide: Decide,
        ahead_seconds: float | None = None,
    ) -> tuple[int, int]:
        with storage_errors("planner transaction"):
            async with self._pool.acquire() as conn, conn.transaction():
                return await self.plan_on(
                    conn, limit=limit, lookahead_seconds=lookahead_seconds, decide=decide,
                    ahead_seconds=ahead_seconds,
                )

    async def plan_on(
        self,
        conn: asyncpg.Connection,
        *,
        limit: int,
        lookahead_seconds: float,
        decide: Decide,
        ahead_seconds: float | None = None,
    ) -> tuple[int, int]:
        """The planner's statements on ``conn``, which must already be in a transaction.

        Public so a crash test can hold the transaction open after the writes; runtime
        code goes through :meth:`plan_due`. Driver errors are not translated here.
        """
        if ahead_seconds is None:
            rows = await conn.fetch(Q["schedule_claim_due"], float(lookahead_seconds), limit)
        else:
            rows = await conn.fetch(Q["schedule_claim_ahead"], float(lookahead_seconds), limit,
                                    float(ahead_seconds))
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
        excluded = await _exclusions(conn, rows)
        decision = decide([_due_schedule(row, excluded.get(row["id"], NO_EXCLUSIONS))
                           for row in rows], db_now, writable)
        # Flow keys (ADR 0040) ride beside the decision: they do not change what is planned.
        flow_keys = {row["id"]: row["flow_key"] for row in rows if row["flow_key"] is not None}
        inserted = 0
        if decision.runs:
            status = await conn.execute(Q["job_run_insert_planned"],
                                        *_run_columns(decision, flow_keys))
            inserted = rows_affected(status)
        if decision.advances:
            await conn.execute(Q["schedule_advance"], *_advance_columns(decision))
        return len(rows) - decision.passed_over, inserted

    async def db_now(self) -> datetime:
        with storage_errors("read the database clock"):
            now: datetime = await self._pool.fetchval(Q["database_now"])
        return now


def _run_columns(
    decision: PlanDecision, flow_keys: dict[Any, str] | None = None,
) -> tuple[list[Any] | None, ...]:
    """The runs as parallel arrays, the shape ``unnest`` takes (one array per column).

    Ids go to asyncpg as hex text (it parses that in C) and the idempotency key is the
    same hex (``idempotency_key_for``): no ``uuid.UUID`` object per run."""
    runs = decision.runs
    schedules = [run.schedule_id for run in runs]
    times = [run.scheduled_for for run in runs]
    ids = run_id_hexes(zip(schedules, times, strict=True))
    # Overlap policies and jitter offsets only when some run has one: NULL otherwise
    # (the insert reads a NULL array as NULL for every run), so 'allow' costs nothing.
    shaped = any(run.overlap_policy is not None or run.jitter_ms for run in runs)
    return (
        ids,
        [run.tenant_id for run in runs],
        schedules,
        times,
        [IDEMPOTENCY_KEY_PREFIX + run_id for run_id in ids],
        [run.trigger.value for run in runs],
        [run.status.value for run in runs],
        [run.overlap_policy.value if run.overlap_policy else None for run in runs]
        if shaped else None,
        [run.jitter_ms for run in runs] if shaped else None,
        [flow_keys.get(run.schedule_id) for run in runs] if flow_keys else None,
        [run.skip_reason.value if run.skip_reason else None for run in runs]
        if any(run.skip_reason for run in runs) else None,
    )


def _advance_columns(decision: PlanDecision) -> tuple[list[Any] | None, ...]:
    advances = decision.advances
    completed = [a.schedule_id for a in advances if a.completed]
    return (
        [a.schedule_id for a in advances],
        [a.next_fire_at for a in advances],
        [a.last_fire_at for a in advances],
        [a.planned for a in advances],
        completed or None,
    )
