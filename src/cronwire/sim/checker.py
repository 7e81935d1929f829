"""The guarantees, checked as the simulation runs (after every step of the loop, or at
the event that could break them) and once at the end.

1. every occurrence has exactly one run (at most one on every insert; at least one at
   the end, for every occurrence of the simulated span);
2. no run is delivered with a 2xx twice, unless the first one's replica crashed before
   its result was written, or its lease was lost in an outage while it was in flight;
3. lease rules: (1) no replica has more requests in flight than delivery workers;
   (2) a lease held by a live replica never expires unless the database was away within
   one lease before it expired; (3) every write on a leased run is made by its holder,
   under the generation it holds;
4. overlap: a run of a ``skip``/``buffer_*`` schedule starts only while no other run of
   that schedule is running or retrying;
5. the history matches what receivers saw: every attempt a write records was answered
   by that receiver, to that replica, with that status;
6. flow control: a key's concurrency, rate and Retry-After holds, and its slot count
   (sim/flow_check.py), at every claim and write;
7. at the end, nothing is stuck: every run due well before the end has ended, unless
   its flow-control key was still holding runs back near the end.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from cronwire.adapters.memory.database import RUNNABLE
from cronwire.domain.model import ClaimBatch, OverlapPolicy, RunStatus
from cronwire.sim.database import SimDatabase
from cronwire.sim.faults import FaultState, Life
from cronwire.sim.flow_check import FlowWatch
from cronwire.sim.trace import Trace, short

ONE_AT_A_TIME = frozenset({OverlapPolicy.SKIP, OverlapPolicy.BUFFER_ONE,
                           OverlapPolicy.BUFFER_ALL})
RunKey = tuple[uuid.UUID, datetime]


@dataclass(frozen=True, slots=True)
class Violation:
    kind: str
    message: str
    at: float

    def __str__(self) -> str:
        return f"{self.kind} at t={self.at:.3f}s: {self.message}"


@dataclass(slots=True)
class Exchange:
    """One request as the receiver saw it."""

    run: RunKey
    attempt: int
    life: Life
    generation: int
    sent_at: float
    status: int | None  # None: it never answered (hang)
    in_time: bool  # answered before the request's deadline


class Checker:
    def __init__(self, db: SimDatabase, trace: Trace, faults: FaultState, *,
                 lease_seconds: float, workers: int, now: Callable[[], float],
                 stop: Callable[[Violation], None]) -> None:
        self._db = db
        self._trace = trace
        self._faults = faults
        self._lease = lease_seconds
        self._workers = workers
        self._now = now
        self._stop = stop
        self.violations: list[Violation] = []
        # (run, owner incarnation, generation) -> status its write landed with
        self._landed: dict[tuple[RunKey, str, int], RunStatus] = {}
        self._crashed_at: dict[int, float] = {}  # id(life) -> virtual time of its crash
        self._leased: dict[RunKey, tuple[Life, int]] = {}
        self._delivered: dict[RunKey, list[Exchange]] = {}
        self._heard: dict[tuple[RunKey, int, str], int | None] = {}
        self._checked_at = -1.0
        self.flow = FlowWatch(db, self.fail)

    def fail(self, kind: str, message: str) -> None:
        violation = Violation(kind, message, self._now())
        self._trace.add("VIOLATION", str(violation))
        self.violations.append(violation)
        self._stop(violation)

    # -- events ---------------------------------------------------------------------

    def crashed(self, life: Life) -> None:
        self._crashed_at[id(life)] = self._now()

    def inserted(self, schedule_id: uuid.UUID, scheduled_for: datetime) -> None:
        count = self._db.per_occurrence.get((schedule_id, scheduled_for), 0)
        if count > 1:
            self.fail("one-run-per-occurrence",
                      f"schedule {short(schedule_id)} has {count} runs for {scheduled_for}")

    def claimed(self, life: Life, batch: ClaimBatch) -> None:
        self.flow.sync()
        for run in batch.runs:
            key = (run.id, run.scheduled_for)
            self._leased[key] = (life, run.lease_generation)
            row = self._db.runs.get(key)
            if row is not None and row.overlap_policy in ONE_AT_A_TIME:
                self._check_alone(row.schedule_id, key)

    def _check_alone(self, schedule_id: uuid.UUID, key: RunKey) -> None:
        for other in self._db.runs.values():
            if (other.schedule_id == schedule_id and other.key != key
                    and other.overlap_policy in ONE_AT_A_TIME
                    and other.status in (RunStatus.RUNNING, RunStatus.RETRYING)):
                self.fail("overlap", f"run {short(key[0])} started while run "
                          f"{short(other.id)} of the same schedule is {other.status} "
                          f"(policy {other.overlap_policy})")
                return

    def write(self, owner: str, keys: Iterable[tuple[RunKey, int]],
              before: dict[RunKey, tuple[str | None, int, RunStatus, int]]) -> None:
        """Lease rule 3: every row a write changed was held by ``owner`` under a
        generation the write named (a batch may name one run twice: a result of an
        older lease of ours and one of the lease we hold now; only the latter may land)."""
        self.flow.sync()
        named: dict[RunKey, set[int]] = {}
        for key, generation in keys:
            named.setdefault(key, set()).add(generation)
        for key, generations in named.items():
            row = self._db.runs.get(key)
            was = before.get(key)
            if row is None or was is None or row.version == was[3]:
                continue
            holder, held_generation, status, _ = was
            if holder != owner or held_generation not in generations \
                    or status is not RunStatus.RUNNING:
                self.fail("lease-rule-3", f"{owner} wrote run {short(key[0])} (generation "
                          f"{'/'.join(map(str, sorted(generations)))}) while it was {status}, "
                          f"held by {holder} under generation {held_generation}")
                return

    def landed(self, owner: str, key: RunKey, generation: int, status: RunStatus,
               attempt: int | None, status_code: int | None) -> None:
        self._landed[(key, owner, generation)] = status
        if attempt is None:
            return
        heard = self._heard.get((key, attempt, owner), "none")
        if heard == "none" and status_code is None and status is RunStatus.CANCELLED:
            return  # cancel_other aborted the request in flight (ADR 0060): no answer
        if heard == "none" or heard != status_code:
            seen = "never answered it" if heard == "none" else f"answered {heard}"
            self.fail("history", f"run {short(key[0])} attempt {attempt} recorded with status "
                      f"{status_code} by {owner}, but its receiver {seen}")

    def sent(self, life: Life) -> None:
        if life.in_flight > self._workers:
            self.fail("lease-rule-1", f"{life.owner} has {life.in_flight} requests in flight "
                      f"with {self._workers} workers")

    def heard(self, exchange: Exchange, status: int | None) -> None:
        self._heard[(exchange.run, exchange.attempt, exchange.life.owner)] = status

    def answered(self, exchange: Exchange) -> None:
        """The receiver answered: a 2xx in time is a delivery."""
        if exchange.status is None or not 200 <= exchange.status < 300 or not exchange.in_time:
            return
        earlier = self._delivered.setdefault(exchange.run, [])
        for first in earlier:
            if not self._excused(first, exchange):
                self.fail("duplicate-delivery",
                          f"run {short(exchange.run[0])} delivered with a 2xx by "
                          f"{first.life.owner} (t={first.sent_at:.3f}) and again by "
                          f"{exchange.life.owner} (t={exchange.sent_at:.3f}), with no crash "
                          "or lease loss in between")
                return
        earlier.append(exchange)

    def _excused(self, first: Exchange, again: Exchange) -> bool:
        if (first.run, first.life.owner, first.generation) in self._landed:
            return False  # its success was written, yet the run went out again
        crashed = self._crashed_at.get(id(first.life))
        if crashed is not None and crashed <= again.sent_at:
            return True
        return (self._faults.outage_between(first.sent_at, again.sent_at)
                or self._faults.stalled_between(first.life, first.sent_at, again.sent_at))

    # -- after every step -----------------------------------------------------------

    def step(self) -> None:
        now = self._now()
        if now == self._checked_at or not self._leased:
            return
        self._checked_at = now
        db_now = self._db.now()
        gone = []
        for key, (life, generation) in self._leased.items():
            row = self._db.runs.get(key)
            if (row is None or not life.alive or row.status is not RunStatus.RUNNING
                    or row.claimed_by != life.owner or row.lease_generation != generation):
                gone.append(key)
                continue
            expires = row.claim_expires_at
            if expires is None or expires >= db_now:
                continue
            gone.append(key)
            seconds = now + (expires - db_now).total_seconds()  # virtual time of expiry
            window = (seconds - self._lease, seconds + 1e-9)
            if not (self._faults.outage_between(*window)
                    or self._faults.stalled_between(life, *window)):
                self.fail("lease-rule-2", f"the lease of {life.owner} on run {short(key[0])} "
                          f"expired at t={seconds:.3f}s while it still held it, with the "
                          "database up and the replica running")
                break
        for key in gone:
            self._leased.pop(key, None)

    # -- at the end -----------------------------------------------------------------

    def final(self, periods: dict[uuid.UUID, int], first: dict[uuid.UUID, datetime],
              until: datetime, settled_by: datetime) -> None:
        """Every occurrence of [first fire, until) has a run; nothing due before
        ``settled_by`` is left unfinished."""
        for schedule_id, period in periods.items():
            at = first[schedule_id]
            while at < until:
                if self._db.per_occurrence.get((schedule_id, at), 0) != 1:
                    self.fail("one-run-per-occurrence",
                              f"schedule {short(schedule_id)}: "
                              f"{self._db.per_occurrence.get((schedule_id, at), 0)} runs for "
                              f"the occurrence {at.isoformat()}")
                    return
                at += timedelta(seconds=period)
        for run in self._db.runs.values():
            if run.status.terminal:
                continue
            expired = (run.status is RunStatus.RUNNING and run.claim_expires_at is not None
                       and run.claim_expires_at < settled_by)
            waiting = run.status in RUNNABLE and run.fire_after < settled_by
            if waiting and self.flow.waiting_its_turn(run.tenant_id, run.flow_key,
                                                      self._db.now()):
                continue
            if expired or waiting:
                self.fail("stuck", f"run {short(run.id)} of schedule {short(run.schedule_id)} "
                          f"({run.scheduled_for.isoformat()}) is still {run.status} at the end "
                          f"(due {run.fire_after.isoformat()})")
                return
