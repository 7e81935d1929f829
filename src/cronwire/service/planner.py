"""Stage 1 loop: every tick, materialise the runs of due schedules (seed ADR, ADR 0001).

Every replica runs one; they never talk to each other. ``SKIP LOCKED`` spreads the due
schedules over them and ``UNIQUE (schedule_id, scheduled_for)`` catches anything that
slips through, so more planners only means more throughput.

Within a replica the same holds for transactions: while a burst is due, ``concurrency``
ticks run side by side, each its own transaction on its own pooled connection, so Python
decides one batch while Postgres writes another (ADR 0012, "The planner in a burst").
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from cronwire.domain.errors import StorageError
from cronwire.domain.model import DueSchedule, PlanDecision
from cronwire.domain.planning import Span, decide
from cronwire.domain.planning_ahead import decide_ahead
from cronwire.ports import Metrics, PlannerStore, Tracer
from cronwire.ports.observability import TRACING_OFF
from cronwire.service.supervisor import LoopCrashed

log = logging.getLogger(__name__)

# Planner transactions in flight while full batches keep coming: two overlap Python's
# decide with Postgres's writes; more only queue behind the same two cores (ADR 0012).
PIPELINE_DEPTH = 2
# While nothing is due within the look-ahead, schedules that fire at most once a minute
# get their next occurrence written up to this far ahead (ADR 0023): 100,000 schedules on
# one instant are then written in the minute before it, not all in its last 5 s.
AHEAD_SECONDS = 60.0


@dataclass(frozen=True, slots=True)
class TickResult:
    """What one planner transaction did; ``failed`` ticks wrote nothing."""

    schedules: int
    runs_inserted: int
    failed: bool = False


class Planner:
    def __init__(
        self,
        store: PlannerStore,
        metrics: Metrics,
        *,
        batch: int,
        tick_seconds: float,
        lookahead_seconds: float,
        monotonic: Callable[[], float] = time.monotonic,
        concurrency: int = PIPELINE_DEPTH,
        ahead_seconds: float = AHEAD_SECONDS,
        tracer: Tracer = TRACING_OFF,
    ) -> None:
        self._store = store
        self._metrics = metrics
        self._batch = batch
        self._tick_seconds = tick_seconds
        self._lookahead_seconds = lookahead_seconds
        self._decide = functools.partial(decide, lookahead_seconds=lookahead_seconds)
        # The early pass only reaches past the look-ahead; no further than it: no early pass.
        self._ahead_seconds = ahead_seconds if ahead_seconds > lookahead_seconds else None
        self._decide_ahead = functools.partial(decide_ahead, ahead_seconds=ahead_seconds)
        self._monotonic = monotonic
        self._tracer = tracer
        self._concurrency = max(1, concurrency)
        # Set while the last tick came back full: more is due, so helpers tick too (early
        # ticks while _ahead_busy, when what is full is the early pass).
        self._busy = asyncio.Event()
        self._ahead_busy = False
        self._waiters: list[asyncio.Future[TickResult]] = []
        # Totals since start: the typed test signal, alongside next_tick().
        self.ticks = 0
        self.failed_ticks = 0
        self.schedules_claimed = 0
        self.runs_inserted = 0

    async def run(self, stopping: asyncio.Event) -> None:
        """Tick until ``stopping`` is set. A full batch means more is due: tick again at
        once, and let the helpers tick alongside. Otherwise make an early tick (the next
        occurrence of infrequent schedules, up to ``ahead_seconds``), again at once while
        those come back full, the look-ahead's tick first each turn; then wait one tick
        interval (or until stopping). Idle, only this loop asks the database."""
        helpers = [asyncio.create_task(self._help(stopping), name="planner-helper")
                   for _ in range(self._concurrency - 1)]
        try:
            while not stopping.is_set():
                result = await self.tick()
                _raise_if_crashed(helpers)
                if self._full(result):
                    self._ahead_busy = False
                    self._busy.set()
                    continue
                self._busy.clear()
                if self._ahead_seconds is not None and self._full(await self.tick(ahead=True)):
                    self._ahead_busy = True
                    self._busy.set()
                    continue
                self._busy.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stopping.wait(), self._tick_seconds)
        except BaseException:
            for helper in helpers:
                helper.cancel()
            raise
        finally:
            self._busy.set()  # wakes idle helpers, which then see stopping
            await asyncio.gather(*helpers, return_exceptions=True)
        _raise_if_crashed(helpers)

    async def _help(self, stopping: asyncio.Event) -> None:
        """One more transaction in flight while batches come back full. ``SKIP LOCKED``
        keeps its claim disjoint from the main loop's; the first batch that is not full
        means the due set is (nearly) drained, so it waits to be woken again."""
        while True:
            await self._busy.wait()
            if stopping.is_set():
                return
            result = await self.tick(ahead=self._ahead_busy)
            # Stopping may have come while the transaction was in flight: the loop's last
            # wake-up is behind us, so going back to sleep would never end.
            if stopping.is_set():
                return
            if not self._full(result):
                self._busy.clear()

    def _full(self, result: TickResult) -> bool:
        return result.schedules >= self._batch and not result.failed

    async def tick(self, *, ahead: bool = False) -> TickResult:
        """One planner transaction (``ahead``: the early pass). A storage failure is
        logged, counted and retried by the next tick; the transaction rolled back, so it
        wrote nothing."""
        started = self._monotonic()
        decide: Decide = (self._decide_ahead if ahead and self._ahead_seconds is not None
                          else self._decide)
        planned: list[PlanDecision] = []
        traced_from = 0
        if self._tracer.enabled:
            traced_from = time.time_ns()
            decide = _remembering(decide, planned)
        try:
            if ahead and self._ahead_seconds is not None:
                schedules, inserted = await self._store.plan_due(
                    limit=self._batch, lookahead_seconds=self._lookahead_seconds,
                    decide=decide, ahead_seconds=self._ahead_seconds,
                )
            else:
                schedules, inserted = await self._store.plan_due(
                    limit=self._batch, lookahead_seconds=self._lookahead_seconds,
                    decide=decide,
                )
            result = TickResult(schedules, inserted)
        except StorageError as exc:
            log.error("planner tick failed, retrying in %ss: %s", self._tick_seconds, exc)
            result = TickResult(0, 0, failed=True)
        finally:
            self._metrics.planner_tick(self._monotonic() - started)
        if self._tracer.enabled and (result.schedules or result.failed):
            self._tracer.planner_tick(
                traced_from, time.time_ns(), schedules=result.schedules,
                runs=result.runs_inserted, failed=result.failed,
                planned=[run.id for decision in planned for run in decision.runs])
        self._record(result)
        return result

    async def next_tick(self) -> TickResult:
        """The result of the next tick to complete (tests await this instead of sleeping)."""
        waiter: asyncio.Future[TickResult] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        return await waiter

    def _record(self, result: TickResult) -> None:
        self.ticks += 1
        self.failed_ticks += result.failed
        self.schedules_claimed += result.schedules
        self.runs_inserted += result.runs_inserted
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(result)


Decide = Callable[[Sequence[DueSchedule], datetime, Span | None], PlanDecision]


def _remembering(decide: Decide, into: list[PlanDecision]) -> Decide:
    """``decide``, keeping what it decided (tracing links the tick to the planned runs)."""
    def remembered(schedules: Sequence[DueSchedule], now: datetime,
                   writable: Span | None) -> PlanDecision:
        decision = decide(schedules, now, writable)
        into.append(decision)
        return decision

    return remembered


def _raise_if_crashed(helpers: list[asyncio.Task[None]]) -> None:
    """A helper only ends early on a bug (storage errors are retried inside ``tick``):
    fail the planner loop, as a crash of the loop itself would."""
    for helper in helpers:
        if helper.done() and not helper.cancelled() and helper.exception() is not None:
            raise LoopCrashed("planner-helper") from helper.exception()
