"""RunCommands on Postgres: backfill and replay, the tenant's runs made outside the planner.

Both write in one transaction that holds the schedule ``FOR SHARE``, so a concurrent delete
waits and then cancels what was written (job_run_cancel_for_schedule). The decisions are
the domain's (:mod:`cronwire.domain.backfill`, :mod:`cronwire.domain.replay`); the
statements only apply them, one round trip per batch (queries/job_run.sql).

A backfill walks first, then writes (ADR 0055): its walk (up to 10,001 occurrences and
their run ids, ~0.1-0.3 s of CPU) runs in the API's CPU lane with no connection held; the
writing transaction then reads the schedule again under its lock and writes only if the
walk was of that very definition (else it walks again).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial

import asyncpg

from cronwire.adapters.postgres.audit_log import write_audits
from cronwire.adapters.postgres.driver_errors import storage_errors
from cronwire.adapters.postgres.run_history import EARLIEST, LATEST, run_view
from cronwire.adapters.postgres.schedule_changes import audit_schedule
from cronwire.adapters.postgres.schedule_rows import found_row, schedule_record
from cronwire.adapters.postgres.sql import queries, rows_affected
from cronwire.adapters.postgres.volume import locked_open_runs, open_runs
from cronwire.domain.access import BY_SYSTEM, Change
from cronwire.domain.audit import AuditEntry, Changes
from cronwire.domain.backfill import FIRST_SHOWN, BackfillPlan, BackfillResult
from cronwire.domain.delivery import rfc3339_utc
from cronwire.domain.errors import StateConflict, StorageError
from cronwire.domain.history import RunView
from cronwire.domain.model import (
    IDEMPOTENCY_KEY_PREFIX,
    OverlapPolicy,
    idempotency_key_for,
    run_id_for,
    run_id_hexes,
)
from cronwire.domain.planning import writable_span
from cronwire.domain.replay import ReplayQuery
from cronwire.domain.schedules import ScheduleSpec
from cronwire.domain.volume import LIMIT
from cronwire.ports import BackfillPlanner, CpuWork, OnTheLoop

Q = queries()
# A replay's instant collides only with another manual or replay run in the same
# microsecond of the same schedule: a new reading is tried.
INSERT_TRIES = 5
_MICROSECOND = timedelta(microseconds=1)
# A schedule edited while its backfill walked is walked again; this often in a row is a
# conflict the caller retries (409).
WALK_TRIES = 3

# What a walk was of: the definition, the database's now and the oldest writable instant.
_Walked = tuple[ScheduleSpec, datetime, datetime | None]


@dataclass(frozen=True, slots=True)
class _Walk:
    """A backfill's plan and the statements' arrays, as array literals (see
    job_run_insert_backfill for why): the occurrences, and for a backfill that writes, the
    runs' ids and idempotency keys."""

    plan: BackfillPlan
    occurrences: str
    ids: str = "{}"
    keys: str = "{}"


def _array(items: Iterable[str]) -> str:
    """A Postgres array literal of items that need no quoting (ISO instants, hex ids)."""
    return "{" + ",".join(items) + "}"


def _walk(plan: BackfillPlanner, walked: _Walked, ids_of: uuid.UUID | None) -> _Walk:
    """The plan and its arrays (given the schedule's id: a backfill that writes). Pure CPU,
    run in the API's lane."""
    decided = plan(*walked)
    occurrences = _array(at.isoformat() for at in decided.occurrences)
    if ids_of is None:
        return _Walk(decided, occurrences)
    ids = run_id_hexes((ids_of, at) for at in decided.occurrences)
    return _Walk(decided, occurrences, _array(ids),
                 _array(f"{IDEMPOTENCY_KEY_PREFIX}{run_id}" for run_id in ids))


def replay_instants(first: datetime, count: int) -> list[datetime]:
    """``count`` distinct instants from ``first`` on, 1 µs apart, none a whole second (a
    whole second is a cron occurrence's kind of instant: job_run_manual_instant)."""
    instants: list[datetime] = []
    at = first
    while len(instants) < count:
        if at.microsecond:
            instants.append(at)
        at += _MICROSECOND
    return instants


async def _walked(conn: asyncpg.Connection, tenant_id: uuid.UUID,
                  schedule_id: uuid.UUID) -> _Walked:
    """What a backfill walks over: the definition, the database's now and the oldest
    instant a run can be written at, as the schedule stands (held FOR SHARE in a
    transaction, or only read outside one). The walk never depends on the now being
    fresh: a later now only widens what ``end`` may be."""
    row = found_row(await conn.fetchrow(Q["schedule_share"], tenant_id, schedule_id),
                    schedule_id)
    bounds = await conn.fetch(Q["job_run_partition_bounds"])
    span = writable_span(((b["lower_bound"], b["upper_bound"]) for b in bounds), row["db_now"])
    return schedule_record(row).spec, row["db_now"], span[0] if span else None


def _backfilled(found: Sequence[datetime], status: str) -> Changes:
    """What a backfill's audit row says: how many runs it made, over which occurrences."""
    return {"runs_created": [None, rows_affected(status)],
            "first_occurrence": [None, rfc3339_utc(min(found))],
            "last_occurrence": [None, rfc3339_utc(max(found))]}


class PostgresRunCommands:
    def __init__(self, pool: asyncpg.Pool, *, cpu: CpuWork | None = None) -> None:
        self._pool = pool
        self._cpu = cpu or OnTheLoop()

    async def backfill(
        self, tenant_id: uuid.UUID, schedule_id: uuid.UUID, plan: BackfillPlanner, *,
        dry_run: bool, max_pending_runs: int, change: Change = BY_SYSTEM,
    ) -> BackfillResult:
        action = f"backfilling schedule {schedule_id}"
        for _ in range(WALK_TRIES):
            with storage_errors(action):
                async with self._pool.acquire() as conn:
                    walked = await _walked(conn, tenant_id, schedule_id)
            walk = await self._cpu.run(
                partial(_walk, plan, walked, None if dry_run else schedule_id))
            found = walk.plan.occurrences
            with storage_errors(action):
                if dry_run:
                    async with self._pool.acquire() as conn:
                        existing = await conn.fetchval(
                            Q["job_run_count_occurrences"], tenant_id, schedule_id,
                            walk.occurrences)
                        room = await open_runs(conn, tenant_id, max_pending_runs)
                    over = None if room.admits(len(found) - existing) else LIMIT
                    return BackfillResult(len(found), 0, existing, found[:FIRST_SHOWN], True,
                                          over_limit=over)
                async with self._pool.acquire() as conn, conn.transaction():
                    spec, _, oldest = await _walked(conn, tenant_id, schedule_id)
                    if (spec, oldest) != (walked[0], walked[2]):
                        continue  # edited (or retention ran) while it walked: walk again
                    room = await locked_open_runs(conn, tenant_id, max_pending_runs)
                    if not room.admits(len(found)):
                        # Only near the limit: the occurrences that have a run add nothing.
                        existing = await conn.fetchval(
                            Q["job_run_count_occurrences"], tenant_id, schedule_id,
                            walk.occurrences)
                        room.check(len(found) - existing)
                    gated = walk.plan.overlap_policy
                    status = await conn.execute(
                        Q["job_run_insert_backfill"], tenant_id, schedule_id, walk.ids,
                        walk.occurrences, walk.keys,
                        None if gated is OverlapPolicy.ALLOW else gated.value)
                    if rows_affected(status):
                        await audit_schedule(conn, tenant_id, schedule_id, change,
                                             "schedule.backfill", _backfilled(found, status))
            created = rows_affected(status)
            return BackfillResult(len(found), created, len(found) - created,
                                  found[:FIRST_SHOWN])
        raise StateConflict(f"schedule {schedule_id} changed {WALK_TRIES} times while its "
                            "backfill was computed; try again")

    async def replay(self, tenant_id: uuid.UUID, run_id: uuid.UUID, *,
                     max_pending_runs: int, change: Change = BY_SYSTEM) -> RunView:
        source = await self._source(tenant_id, run_id)
        replays = await self._replay(tenant_id, [(source["id"], source["scheduled_for"],
                                                  source["schedule_id"])], max_pending_runs,
                                    change)
        if not replays:  # a concurrent request replayed it between the check and the write
            raise StateConflict(f"run {run_id} was replayed meanwhile by another request")
        return replays[0]

    async def replay_failed(self, tenant_id: uuid.UUID, query: ReplayQuery, *,
                            max_pending_runs: int,
                            change: Change = BY_SYSTEM) -> list[uuid.UUID]:
        with storage_errors("finding failed runs to replay"):
            rows = await self._pool.fetch(
                Q["job_run_dead_letters"], tenant_id, query.since or EARLIEST,
                query.until or LATEST, query.limit, query.schedule_id)
        replays = await self._replay(
            tenant_id, [(r["id"], r["scheduled_for"], r["schedule_id"]) for r in rows],
            max_pending_runs, change)
        return [run.id for run in replays]

    async def _source(self, tenant_id: uuid.UUID, run_id: uuid.UUID) -> asyncpg.Record:
        with storage_errors(f"reading run {run_id}"):
            row = await self._pool.fetchrow(Q["job_run_replay_source"], tenant_id, run_id)
        source = found_row(row, run_id, "run")
        if source["schedule_status"] == "deleted":
            raise StateConflict(f"run {run_id}: its schedule was deleted; nothing replays it")
        if source["status"] != "failed":
            raise StateConflict(f"run {run_id} is {source['status']}: only failed runs (dead "
                                "letters) are replayed")
        if source["replayed_by"] is not None:
            raise StateConflict(f"run {run_id} was replayed already, by run "
                                f"{source['replayed_by']} (replay that one if it failed)")
        return source

    async def _replay(
        self, tenant_id: uuid.UUID, originals: list[tuple[uuid.UUID, datetime, uuid.UUID]],
        max_pending_runs: int, change: Change,
    ) -> list[RunView]:
        """Write the replays of ``originals`` ((id, scheduled_for, schedule_id)) whose
        schedule is live and that are still failed and not replayed, if they all fit
        under the tenant's limit on runs not yet ended."""
        if not originals:
            return []
        with storage_errors("replaying runs"):
            for attempt in range(INSERT_TRIES):
                try:
                    return await self._replay_once(tenant_id, originals, max_pending_runs,
                                                   change)
                except asyncpg.UniqueViolationError:
                    if attempt + 1 == INSERT_TRIES:
                        raise
        raise StorageError("no free instant for the replays; try again")  # pragma: no cover

    async def _replay_once(
        self, tenant_id: uuid.UUID, originals: list[tuple[uuid.UUID, datetime, uuid.UUID]],
        max_pending_runs: int, change: Change,
    ) -> list[RunView]:
        async with self._pool.acquire() as conn, conn.transaction():
            live = {r["id"] for r in await conn.fetch(
                Q["schedule_share_live"], tenant_id, list({o[2] for o in originals}))}
            kept = [o for o in originals if o[2] in live]
            if not kept:
                return []
            # At most len(kept): an original replayed meanwhile adds nothing.
            (await locked_open_runs(conn, tenant_id, max_pending_runs)).check(len(kept))
            first: datetime = await conn.fetchval(Q["job_run_manual_instant"])
            instants = replay_instants(first, len(kept))
            new_ids = [run_id_for(schedule_id, at)
                       for (_, _, schedule_id), at in zip(kept, instants, strict=True)]
            rows = await conn.fetch(
                Q["job_run_insert_replay"], tenant_id, [o[0] for o in kept],
                [o[1] for o in kept], new_ids, instants,
                [idempotency_key_for(run_id) for run_id in new_ids])
            replays = [run_view(row) for row in rows]
            await write_audits(conn, tenant_id, [
                AuditEntry(change, "run.replay", "run", str(run.replay_of),
                           {"replayed_by": [None, str(run.id)]}) for run in replays])
        return replays
