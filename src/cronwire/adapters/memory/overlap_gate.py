"""The claim's overlap gate over a :class:`MemoryDatabase` (job_run.sql's ``gate`` CTEs):
the verdicts are :func:`cronwire.domain.overlap.gate`'s, decided on the state before the
claim writes anything, as the one Postgres statement sees its snapshot."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from datetime import datetime, timedelta

from cronwire.adapters.memory.database import RUNNABLE, MemoryDatabase, MemoryRun
from cronwire.domain.model import OverlapPolicy, RunStatus
from cronwire.domain.overlap import (
    BUFFER_LIMITS,
    Candidate,
    Gate,
    Occupant,
    ahead_of,
    gate,
    new_occupant,
    wait_seconds,
)

SUPERSEDED_ERROR = "Cancelled: superseded by a newer occurrence (overlap_policy cancel_other)"
# The waiting count stops here, as the SQL's LIMIT 101 does.
_COUNT_CAP = max(BUFFER_LIMITS.values()) + 1


def _occupant(db: MemoryDatabase, schedule_id: uuid.UUID) -> Occupant | None:
    held = db.schedules[schedule_id].overlap_run
    if held is None:
        return None
    row = db.runs.get(held)
    # A row not found has not visibly ended (Postgres: written after the snapshot).
    return Occupant(held[0], held[1], ended=row is not None and row.status.terminal)


def _earlier_waiting(db: MemoryDatabase, run: MemoryRun, occupant: Occupant | None,
                     now: datetime) -> int:
    count = 0
    for other in db.runs.values():
        if (other.schedule_id == run.schedule_id and other.overlap_policy is not None
                and other.status in RUNNABLE and other.scheduled_for < run.scheduled_for
                and other.scheduled_for <= now
                and (occupant is None or other.id != occupant.run_id)):
            count += 1
            if count >= _COUNT_CAP:
                break
    return count


def _candidate(db: MemoryDatabase, run: MemoryRun, occupant: Occupant | None,
               now: datetime) -> Candidate:
    policy = run.overlap_policy or OverlapPolicy.ALLOW
    waiting = _earlier_waiting(db, run, occupant, now) if policy in BUFFER_LIMITS else 0
    return Candidate(run.id, run.scheduled_for, policy, run.status is RunStatus.RUNNING, waiting)


def pass_gate(db: MemoryDatabase, candidates: Iterable[MemoryRun],
              ) -> tuple[dict[uuid.UUID, Gate], int]:
    """Verdicts on the gated candidates (an ungated run has none), with the gate's own
    writes applied: waiting runs rest, the newest starting run takes the gate, and under
    cancel_other the occupant it replaces ends cancelled unless a lease holds it. Also
    returns how many such occupants it ended (the claim reports them as ended)."""
    now = db.now()
    picked = list(candidates)
    groups: dict[uuid.UUID, list[MemoryRun]] = {}
    for run in picked:
        if run.overlap_policy is not None:
            groups.setdefault(run.schedule_id, []).append(run)
    verdicts: dict[uuid.UUID, Gate] = {}
    writes = []
    for schedule_id, runs in groups.items():
        occupant = _occupant(db, schedule_id)
        seen = [_candidate(db, run, occupant, now) for run in runs]
        decided = gate(occupant, seen)
        verdicts.update(decided)
        writes.append((schedule_id, occupant, seen, decided))
    picked_ids = {run.id for run in picked}
    superseded = 0
    for schedule_id, occupant, seen, decided in writes:  # after every decision, as SQL
        superseded += _apply(db, schedule_id, occupant, seen, decided, picked_ids, now)
    return verdicts, superseded


def _apply(db: MemoryDatabase, schedule_id: uuid.UUID, occupant: Occupant | None,
           seen: list[Candidate], decided: dict[uuid.UUID, Gate], picked: set[uuid.UUID],
           now: datetime) -> int:
    occupied = occupant is not None and not occupant.ended
    for c in seen:
        if decided[c.run_id] is Gate.WAIT:
            busy = occupied and occupant is not None and occupant.run_id != c.run_id
            run = db.runs[(c.run_id, c.scheduled_for)]
            run.fire_after = now + timedelta(seconds=wait_seconds(ahead_of(c, busy)))
            run.published_at = None
            run.version += 1
    winner = new_occupant(seen, decided)
    if winner is None:
        return 0
    schedule = db.schedules[schedule_id]
    schedule.overlap_run = (winner.run_id, winner.scheduled_for)
    busy = occupant is not None and not occupant.ended and occupant.run_id != winner.run_id
    if winner.policy is OverlapPolicy.CANCEL_OTHER and busy and occupant is not None \
            and occupant.run_id not in picked:
        old = db.runs.get((occupant.run_id, occupant.scheduled_for))
        if old is not None and old.status in RUNNABLE and old.lease_free(now):
            old.status = RunStatus.CANCELLED
            old.finished_at = now
            old.claim_expires_at = None
            old.last_error = SUPERSEDED_ERROR
            old.version += 1
            return 1
    return 0
