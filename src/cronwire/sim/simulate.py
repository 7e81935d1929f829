"""One seed's simulation: the scenario's world on a virtual-time loop, replicas started,
faults and tenant actions scheduled, invariants checked after every step, and the
result (first violation, steps, simulated seconds, trace hash)."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import random
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, cast

from cronwire.adapters.memory import MemoryRunCommands, MemoryScheduleStore
from cronwire.domain.backfill import BackfillRequest
from cronwire.domain.errors import CronwireError
from cronwire.domain.schedules import TenantLimits
from cronwire.ports import RunCommands
from cronwire.service import run_commands
from cronwire.sim import replica
from cronwire.sim.checker import Checker, Violation
from cronwire.sim.database import SimDatabase, VirtualClock, seed_world
from cronwire.sim.faults import FaultState, Life
from cronwire.sim.kafka_log import Log
from cronwire.sim.loop import VirtualTimeLoop
from cronwire.sim.mutations import NO_UNIQUE_GUARD
from cronwire.sim.ports import FaultyPort
from cronwire.sim.receivers import Receivers
from cronwire.sim.scenario import (
    REPLICAS,
    Backfill,
    ClockJump,
    Crash,
    Delete,
    Scenario,
    Trigger,
)
from cronwire.sim.trace import Trace, short

# After the horizon the faults stop and the world runs this long to settle; runs due
# more than SETTLE_SECONDS before the end must have ended by then.
TAIL_SECONDS = 45.0
SETTLE_SECONDS = 35.0
RETENTION_SECONDS = 30.0  # ended runs older than this leave the table (kept: the counts)


@dataclass
class SeedResult:
    seed: int
    violation: Violation | None
    steps: int
    simulated_seconds: float
    trace_hash: str
    events: list[str] = field(default_factory=list)


# The tenant limits of the API, out of the way: the simulation tests scheduling, not them.
SIM_LIMITS = TenantLimits(max_schedules=1_000_000, min_interval_seconds=1,
                          max_body_bytes=65_536, max_headers=64)

class _Simulation:
    def __init__(self, scenario: Scenario, loop: VirtualTimeLoop, until: float | None) -> None:
        self.scenario = scenario
        self.loop = loop
        seed = scenario.seed
        self.horizon = scenario.options.seconds
        self.end = self.horizon + TAIL_SECONDS if until is None else until
        self.trace = Trace(loop.time)
        self.db = SimDatabase(VirtualClock(scenario.start, loop), random.Random(f"{seed}/db"))
        self.db.unique_guard = scenario.options.mutation != NO_UNIQUE_GUARD
        self.faults = FaultState(scenario, self.trace, loop.time, self.crash)
        self.done: asyncio.Future[None] = loop.create_future()
        self.checker = Checker(self.db, self.trace, self.faults,
                               lease_seconds=replica.LEASE_SECONDS, workers=replica.WORKERS,
                               now=loop.time, stop=self._stop)
        self.db.on_insert = self.checker.inserted
        self.schedule_ids = seed_world(self.db, scenario, random.Random(f"{seed}/ids"))
        self.first = {sid: cast(datetime, self.db.schedules[sid].next_fire_at)
                      for sid in self.schedule_ids}
        receivers = {sid: scenario.receiver(i) for i, sid in enumerate(self.schedule_ids)}
        self.world = replica.World(
            seed, scenario.options.mode, scenario.options.mutation, self.db, self.faults,
            self.trace, self.checker,
            Receivers(seed, self.db, self.checker, self.trace, receivers),
            Log(scenario, REPLICAS, self.trace) if scenario.options.mode == "kafka" else None)
        self.lives: list[Life] = []
        self.clocks = [replica.ReplicaClock(self.db.now, loop) for _ in range(REPLICAS)]
        self.stopping = asyncio.Event()
        self.api = Life(-1, 0)
        self.deleted: set[uuid.UUID] = set()  # no occurrence check for these at the end

    def unhandled(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        """An error no code handled (a task's exception never retrieved, a callback that
        raised) is a violation; a dead replica's tasks dropped pending are not."""
        error = context.get("exception")
        if error is None or self.loop.tearing_down:
            return
        self.checker.fail("unhandled-error", f"{context.get('message')}: {error!r}")

    def _stop(self, violation: Violation) -> None:
        if not self.done.done():
            self.done.set_result(None)

    # -- replicas ---------------------------------------------------------------------

    def start(self, index: int, incarnation: int) -> None:
        life = Life(index, incarnation)
        if index < len(self.lives):
            self.lives[index] = life
        else:
            self.lives.append(life)
        self.trace.add("start", life.owner)
        life.tasks = replica.start_replica(self.world, life, self.clocks[index], self.stopping)
        for task in life.tasks:
            task.add_done_callback(functools.partial(self._ended, life))

    def _ended(self, life: Life, task: asyncio.Task[None]) -> None:
        if not life.alive or task.cancelled():
            return
        error = task.exception()
        self.checker.fail("replica-loop", f"{task.get_name()} ended while its replica lived: "
                          f"{error!r}")

    def crash(self, life: Life, crash: Crash) -> None:
        if not life.alive:
            return
        life.alive = False
        self.checker.crashed(life)
        self.trace.add("crash", f"{life.owner} (restarts in {crash.down:.3f}s)")
        for task in life.tasks:
            task.cancel()
        if self.world.log is not None:
            # Offsets not committed are delivered again to the partition's next consumer.
            self.world.log.partitions[life.index].rewind()
        self.loop.call_later(crash.down, self.start, life.index, life.incarnation + 1)

    def _crash_now(self, crash: Crash) -> None:
        if not self.faults.quiet:
            self.crash(self.lives[crash.replica], crash)

    def _jump(self, jump: ClockJump) -> None:
        if not self.faults.quiet:
            self.clocks[jump.replica].skew += timedelta(seconds=jump.seconds)
            self.trace.add("clock-jump", f"r{jump.replica} {jump.seconds:+.0f}s")

    # -- tenants ----------------------------------------------------------------------

    async def _act(self, item: Backfill | Trigger | Delete) -> None:
        schedule_id = self.schedule_ids[item.schedule]
        tenant = self.db.schedules[schedule_id].tenant_id
        try:
            if isinstance(item, Backfill):
                now = self.db.now()
                start = now - timedelta(minutes=item.minutes)
                commands = cast(RunCommands, self._port(MemoryRunCommands(self.db)))
                result = await run_commands.backfill(
                    commands, SIM_LIMITS, tenant, schedule_id, BackfillRequest(start, now))
                self.trace.add("backfill", f"{short(schedule_id)} created={result.created}")
            elif isinstance(item, Trigger):
                store: Any = self._port(MemoryScheduleStore(self.db))
                run = await store.trigger(tenant, schedule_id,
                                          max_pending_runs=SIM_LIMITS.max_pending_runs)
                self.trace.add("trigger", f"{short(schedule_id)} run={short(run.id)}")
            else:
                store = self._port(MemoryScheduleStore(self.db))
                # Before the call: a delete whose answer is lost has ended the hold too.
                self.checker.flow.released(tenant, self.db.schedules[schedule_id].spec.flow_key)
                count = await store.delete(tenant, schedule_id)
                self.deleted.add(schedule_id)
                self.trace.add("delete", f"{short(schedule_id)} runs cancelled={count}")
        except CronwireError as exc:
            self.trace.add("action-failed", f"{type(item).__name__}: {exc}")

    def _port(self, inner: object) -> FaultyPort:
        return FaultyPort(inner, self.api, self.faults, self.trace, self.checker)

    # -- retention and the end ---------------------------------------------------------

    def _retain(self) -> None:
        """Ended runs leave the table after a while (kept: those an overlap gate names)."""
        oldest = self.db.now() - timedelta(seconds=RETENTION_SECONDS)
        gates = {s.overlap_run for s in self.db.schedules.values()}
        for key in [k for k, r in self.db.runs.items()
                    if r.status.terminal and r.finished_at is not None
                    and r.finished_at < oldest and k not in gates]:
            del self.db.runs[key]
        self.loop.call_later(RETENTION_SECONDS, self._retain)

    def _quiet(self) -> None:
        self.faults.quiet = True
        self.trace.add("quiet", "faults end")

    async def main(self) -> None:
        for index in range(REPLICAS):
            self.start(index, 0)
        for item in self.scenario.items:
            if isinstance(item, Crash) and not item.in_call:
                self.loop.call_at(item.at, self._crash_now, item)
            elif isinstance(item, ClockJump):
                self.loop.call_at(item.at, self._jump, item)
            elif isinstance(item, Backfill | Trigger | Delete):
                self.loop.call_at(item.at, self._spawn, item)
        self.loop.call_at(self.horizon, self._quiet)
        self.loop.call_later(RETENTION_SECONDS, self._retain)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(self.done), self.end)
        if self.done.done() or self.end < self.horizon + TAIL_SECONDS:
            return
        start = self.scenario.start
        self.checker.final(
            {sid: s.period for sid, s in zip(self.schedule_ids, self.scenario.schedules,
                                             strict=True) if sid not in self.deleted},
            self.first, start + timedelta(seconds=self.horizon),
            start + timedelta(seconds=self.end - SETTLE_SECONDS))

    def _spawn(self, item: Backfill | Trigger | Delete) -> None:
        if not self.faults.quiet:
            self.loop.create_task(self._act(item))


def simulate(scenario: Scenario, *, until: float | None = None) -> SeedResult:
    """Run ``scenario`` (to its end, or to ``until`` virtual seconds) on a fresh loop."""
    loop = VirtualTimeLoop()
    quieted = logging.getLogger("cronwire")
    level = quieted.level
    quieted.setLevel(logging.CRITICAL)
    try:
        sim = _Simulation(scenario, loop, until)
        loop.set_exception_handler(sim.unhandled)
        loop.after_step = sim.checker.step
        loop.run_until_complete(sim.main())
        violation = sim.checker.violations[0] if sim.checker.violations else None
        return SeedResult(scenario.seed, violation, loop.steps, loop.time(),
                          sim.trace.digest, sim.trace.events)
    finally:
        try:
            loop.tear_down()
        finally:
            quieted.setLevel(level)



