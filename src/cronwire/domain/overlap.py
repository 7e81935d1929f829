"""The overlap gate: what a claim does with the runs of a schedule that has an overlap
policy (ADR 0033). Pure; the in-memory claim applies it as is, and the Postgres claim
(queries/job_run.sql, the ``gate`` CTEs) states the same rules in SQL, under the schedule
row's lock. The shared contract suite holds the two to the same outcomes.

One claim sees, per gated schedule:

- the *occupant*: the last run the gate let start (``schedule.overlap_run``), and whether
  it has ended (a terminal status). A run that has not visibly ended holds the gate:
  running, retrying, released back to pending, or written after the claim's snapshot.
- the *candidates*: the schedule's gated runs this claim picked (due, or an expired lease).

Per candidate, by its policy (``busy``: the gate is held by another run):

- ``cancel_other``: the newest occurrence among the candidates and a live occupant starts;
  every older one ends ``cancelled`` (superseded). A superseded occupant whose request is
  in flight is aborted by its holder, which polls for it (LeaseKeeper.abort_superseded),
  and written ``cancelled``; a complete answer that came first is recorded as it came.
- the occupant itself carries on (a retry, a released lease, an expired one);
- ``skip``: busy, or an older candidate starts now: ``skipped`` (reason ``overlap``);
  else it starts;
- ``buffer_one`` / ``buffer_all``: the earliest waiting occurrence starts when the gate is
  free; the others wait in occurrence order behind it or behind the run holding the
  gate, at most 1 / 100 of them; one beyond that is ``skipped``. Waiting moves ``fire_after`` on by
  :func:`wait_seconds`, and the end of the occupant's run wakes the next one at once.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from cronwire.domain.model import OverlapPolicy

BUFFER_LIMITS = {OverlapPolicy.BUFFER_ONE: 1, OverlapPolicy.BUFFER_ALL: 100}
# Waiting runs are looked at again after this long (plus as much again per run ahead of
# them), at most WAIT_MAX_SECONDS: the occupant's end wakes the next one sooner; this only
# bounds how long a wait lasts when that wake-up cannot happen (its lease expired).
WAIT_FIRST_SECONDS = 5
WAIT_MAX_SECONDS = 60


class Gate(StrEnum):
    LEASE = "lease"  # it starts (the claim's lease rules then apply as to any run)
    WAIT = "wait"  # it stays runnable and is looked at again later
    SKIP = "skipped"  # it ends skipped, skip_reason 'overlap'
    CANCEL = "cancelled"  # it ends cancelled: a newer occurrence superseded it
    HOLD = "hold"  # another transaction holds the schedule's row: left untouched now


@dataclass(frozen=True, slots=True)
class Occupant:
    run_id: uuid.UUID
    scheduled_for: datetime
    ended: bool  # terminal, as the claim sees it


@dataclass(frozen=True, slots=True)
class Candidate:
    run_id: uuid.UUID
    scheduled_for: datetime
    policy: OverlapPolicy
    running: bool  # an expired lease being claimed again, not a new start
    # Buffer policies: the schedule's gated runnable runs whose occurrence has arrived and
    # is earlier than this one, the occupant not counted (counted up to 101).
    earlier_waiting: int = 0


def wait_seconds(ahead: int) -> int:
    """How long a waiting run rests before the claim looks at it again, by how many runs
    wait ahead of it."""
    return min(WAIT_MAX_SECONDS, WAIT_FIRST_SECONDS * (1 + max(0, ahead)))


def ahead_of(c: Candidate, busy: bool) -> int:
    """Runs that will wait ahead of ``c``: its earlier waiting runs, less the one that
    starts next when the gate is free (the earliest of them, whether this claim picked it
    or it was woken and has not been claimed yet: in Kafka mode its republish may come
    after later occurrences)."""
    return c.earlier_waiting - (0 if busy else 1)


def gate(occupant: Occupant | None, candidates: Sequence[Candidate]) -> dict[uuid.UUID, Gate]:
    """The verdict on each of one schedule's candidates in one claim."""
    occupied = occupant is not None and not occupant.ended
    fresh = [c.scheduled_for for c in candidates if not c.running]
    first_fresh = min(fresh, default=None)
    newest = max(fresh + ([occupant.scheduled_for] if occupant and occupied else []),
                 default=None)
    verdicts: dict[uuid.UUID, Gate] = {}
    for c in candidates:
        is_occupant = occupant is not None and occupant.run_id == c.run_id
        busy = occupied and not is_occupant
        if c.policy is OverlapPolicy.CANCEL_OTHER:
            verdicts[c.run_id] = (Gate.LEASE if newest is None or c.scheduled_for >= newest
                                  else Gate.CANCEL)
        elif is_occupant or c.running:
            verdicts[c.run_id] = Gate.LEASE
        elif c.policy is OverlapPolicy.SKIP:
            later = first_fresh is not None and c.scheduled_for > first_fresh
            verdicts[c.run_id] = Gate.SKIP if busy or later else Gate.LEASE
        elif c.policy in BUFFER_LIMITS:
            verdicts[c.run_id] = _buffered(c, busy)
        else:  # 'allow' is never gated; a stray one just starts
            verdicts[c.run_id] = Gate.LEASE
    return verdicts


def _buffered(c: Candidate, busy: bool) -> Gate:
    if not busy and c.earlier_waiting == 0:
        return Gate.LEASE
    if ahead_of(c, busy) >= BUFFER_LIMITS[c.policy]:
        return Gate.SKIP
    return Gate.WAIT


def new_occupant(candidates: Sequence[Candidate], verdicts: dict[uuid.UUID, Gate],
                 ) -> Candidate | None:
    """The run that holds the gate after the claim: the newest one that starts."""
    starting = [c for c in candidates if verdicts.get(c.run_id) is Gate.LEASE]
    return max(starting, key=lambda c: c.scheduled_for, default=None)
