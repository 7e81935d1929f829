"""Flow control's guarantees, checked by the simulation at every claim and every write
(ADR 0040, CONTRACT "Flow control"):

* concurrency: a key never has more runs leased (``running``) than the strictest
  ``max_concurrency`` of its live schedules, as the scenario states them;
* rate: lease starts of a key never outrun a token bucket of its ``rate_per_second`` and
  ``burst`` (kept here, from the starts seen, not read from the store);
* holds: no run of a key starts while a receiver's landed Retry-After holds it;
* accounting: the key's ``in_flight`` is the number of its runs leased (a slot given back
  twice or never is a key that admits too much, or stops for ever).

A run whose expired lease is leased again is not a new start: it kept its slot. Runs
leased are read from the database at each look, so a claim whose answer was lost (the
replica never learnt of it) is counted too.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from cronwire.domain.flow_control import default_burst
from cronwire.domain.model import RunStatus
from cronwire.domain.retry import MAX_RETRY_AFTER_SECONDS
from cronwire.sim.database import SimDatabase
from cronwire.sim.trace import short

RunKey = tuple[uuid.UUID, datetime]
FlowKey = tuple[uuid.UUID, str]
EPSILON = 1e-6
# A run of a key that held runs back this recently is waiting its turn, not stuck.
BUSY_SECONDS = 10.0


@dataclass(slots=True)
class _Bucket:
    rate: float
    burst: int
    tokens: float
    at: datetime

    def spend(self, now: datetime) -> float:
        elapsed = (now - self.at).total_seconds()
        self.tokens = min(float(self.burst), self.tokens + self.rate * elapsed) - 1
        self.at = now
        return self.tokens


class FlowWatch:
    def __init__(self, db: SimDatabase, fail: Callable[[str, str], None]) -> None:
        self._db = db
        self._fail = fail
        self._leased: dict[RunKey, FlowKey] = {}  # keyed runs leased (running) now
        self._holds: dict[FlowKey, datetime] = {}
        self._buckets: dict[FlowKey, _Bucket] = {}
        self._created = db.now()  # the world is seeded at this instant: full buckets

    # -- events ---------------------------------------------------------------------

    def sync(self) -> None:
        """After a claim or a write: the keys' leased runs as the database has them now;
        those newly leased since the last look are starts (a claim whose answer was lost
        is seen here too, at the next look)."""
        now = self._db.now()
        leased = {run.key: (run.tenant_id, run.flow_key) for run in self._db.runs.values()
                  if run.flow_key is not None and run.status is RunStatus.RUNNING}
        started = {k: flow for k, flow in leased.items() if k not in self._leased}
        self._leased = leased
        for key, flow in started.items():
            held = self._holds.get(flow)
            if held is not None and held > now + timedelta(seconds=EPSILON):
                self._fail("flow-hold", f"run {short(key[0])} of key {flow[1]!r} started "
                           f"while a Retry-After held the key until {held.isoformat()}")
                return
            bucket = self._bucket(flow)
            if bucket is not None and bucket.spend(now) < -EPSILON:
                self._fail("flow-rate", f"key {flow[1]!r} started more runs than its "
                           f"bucket ({bucket.rate}/s, burst {bucket.burst}) holds")
                return
        counted: dict[FlowKey, int] = {}
        for flow in leased.values():
            counted[flow] = counted.get(flow, 0) + 1
        for flow in set(started.values()):
            limit = self._limit(flow)
            if limit is not None and counted[flow] > limit:
                self._fail("flow-concurrency", f"key {flow[1]!r} has {counted[flow]} runs "
                           f"leased with max_concurrency {limit}")
                return
        for flow, row in self._db.flow.items():
            if flow[1] and row.in_flight != counted.get(flow, 0):
                self._fail("flow-accounting", f"key {flow[1]!r} counts {row.in_flight} in "
                           f"flight with {counted.get(flow, 0)} runs leased")
                return

    def held(self, tenant_id: uuid.UUID, key: str | None, since: datetime,
             seconds: float) -> None:
        """A result carrying a Retry-After landed, written at ``since`` or later: the key
        is held at least from then."""
        if key is None:
            return
        flow = (tenant_id, key)
        until = since + timedelta(seconds=min(max(seconds, 0.0), MAX_RETRY_AFTER_SECONDS))
        self._holds[flow] = max(self._holds.get(flow, until), until)

    def released(self, tenant_id: uuid.UUID, key: str | None) -> None:
        """A schedule of the key was deleted: its hold ends (flow_control_release_holds)."""
        if key is not None:
            self._holds.pop((tenant_id, key), None)

    def waiting_its_turn(self, tenant_id: uuid.UUID, key: str | None, at: datetime) -> bool:
        """Whether the run's key held runs back within BUSY_SECONDS before ``at``."""
        row = self._db.flow.get((tenant_id, key)) if key is not None else None
        refused = row.refused_at if row is not None else None
        return refused is not None and refused >= at - timedelta(seconds=BUSY_SECONDS)

    # -- the rules as the scenario states them -------------------------------------

    def _bucket(self, flow: FlowKey) -> _Bucket | None:
        """The key's bucket: the smallest rate and burst of the key's schedules."""
        if flow not in self._buckets:
            rated = [s.spec.flow_control for s in self._db.schedules.values()
                     if s.tenant_id == flow[0] and s.spec.flow_key == flow[1]
                     and s.spec.flow_control is not None
                     and s.spec.flow_control.rate_per_second is not None]
            if not rated:
                return None
            rate = min(f.rate_per_second or 0.0 for f in rated)
            burst = min(f.burst or default_burst(f.rate_per_second or 0.0) for f in rated)
            self._buckets[flow] = _Bucket(rate, burst, float(burst), self._created)
        return self._buckets[flow]

    def _limit(self, flow: FlowKey) -> int | None:
        limits = [s.spec.flow_control.max_concurrency for s in self._db.schedules.values()
                  if s.tenant_id == flow[0] and s.live and s.spec.flow_key == flow[1]
                  and s.spec.flow_control is not None
                  and s.spec.flow_control.max_concurrency is not None]
        return min(limits, default=None)
