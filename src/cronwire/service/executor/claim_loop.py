"""Stage 2: claim due runs, deliver them, write what happened (the seed ADR's executor).

The lease rules, as this loop keeps them:

1. Claim no more than can start now: a claim asks for at most the idle delivery slots
   (and ``batch``), and every claimed run's request starts at once; nothing queues
   behind a claim while its lease clock runs.
2. Renew while in flight, abandon when lost: :class:`LeaseKeeper` renews every lease of
   this replica in one statement and cancels a request whose lease is gone; its result
   is discarded.
3. Every write carries the lease: results go through :class:`ResolutionWriter`, whose
   batched statement matches only rows still ``running`` and ``claimed_by`` this owner;
   deferrals (open breaker) and releases (shutdown) are predicated the same way, and
   every one of them also names the claim's lease generation (two processes sharing an
   instance id cannot write on each other's leases).

The claim loop, the resolution writer and the lease keeper run as tasks watched
together: if one of them crashes, the executor logs it, abandons what is in flight and
raises :class:`LoopCrashed` naming that loop, so ``/readyz`` says which one and the
replica stops (its leases expire and other replicas re-claim the runs), instead of
holding leases with nobody writing or renewing them.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from datetime import datetime, timedelta

from cronwire.domain.errors import StorageError
from cronwire.domain.model import ClaimedRun
from cronwire.ports import ClaimSource, Clock, Metrics, RunStore, Tracer
from cronwire.ports.observability import TRACING_OFF
from cronwire.service.executor.breaker_gate import BreakerGate
from cronwire.service.executor.claim_wake import ClaimWake
from cronwire.service.executor.database_clock import DatabaseClock
from cronwire.service.executor.deliveries import Deliveries
from cronwire.service.executor.drain import abandon, drain
from cronwire.service.executor.lease_keeper import LeaseKeeper, send_deadline
from cronwire.service.executor.resolution_writer import ResolutionWriter
from cronwire.service.executor.settings import ExecutorSettings
from cronwire.service.signals import ExecutorSignals
from cronwire.service.supervisor import LoopCrashed, all_or_none, first_failure

log = logging.getLogger("cronwire.service.executor")  # the package: drain.py logs as it
# How long a claim waits for more idle slots once some, but fewer than the threshold, are.
GATHER_SECONDS = 0.005


class Executor:
    """The claim loop over collaborators built outside (``bootstrap.executor``): the lease
    keeper, the resolution writer, the breaker gate and the deliveries each own their
    state, and the loop asks them (the slots in flight, the write backlog) instead of
    sharing it."""

    def __init__(
        self,
        settings: ExecutorSettings,
        claim_source: ClaimSource,
        run_store: RunStore,
        *,
        keeper: LeaseKeeper,
        writer: ResolutionWriter,
        gate: BreakerGate,
        deliveries: Deliveries,
        wake: ClaimWake,
        database_clock: DatabaseClock,
        metrics: Metrics,
        clock: Clock,
        signals: ExecutorSignals,
        tracer: Tracer = TRACING_OFF,
    ) -> None:
        self._settings = settings
        self._claims = claim_source
        self._runs = run_store
        self._keeper = keeper
        self._writer = writer
        self._gate = gate
        self._deliveries = deliveries
        self._wake = wake  # set by a finished delivery, a stop or a hint
        self._database_clock = database_clock  # measured here, at every claim
        self._metrics = metrics
        self._clock = clock
        self._signals = signals
        # Off: the hot path reads this one attribute and calls nothing else (ADR 0035).
        self._tracer = tracer
        # Claim when a quarter of the slots are idle, or after a short gathering wait:
        # fewer, larger claims at full load; no starvation when most slots are busy.
        self._claim_threshold = max(1, min(settings.batch, settings.workers) // 4)
        # Claims in flight at once (ADR 0042): while one claim runs in Postgres, the next
        # is already asked, each for its share of the slots. A source that keeps state
        # between claims (kafka mode's consumed keys) says 1.
        self._claims_at_once = max(1, claim_source.claims_at_once)
        self._claim_share = -(-settings.workers // self._claims_at_once)
        self._reserved = 0  # slots promised to claims in flight
        self._backlogged = False  # the last claim came back full: more are due

    @property
    def in_flight(self) -> int:
        return len(self._deliveries)

    async def run(self, stopping: asyncio.Event) -> None:
        """The Supervisor's loop body: claim and deliver until ``stopping``, then drain.
        Raises :class:`LoopCrashed` if the claim loop, the writer or the keeper crashes."""
        keeper = asyncio.create_task(self._keeper.run(), name="executor-leases")
        # Ends the claim loop: set on `stopping`, or at once when an inner loop crashed.
        # (An event, not only a cancel: Python 3.11's wait_for can swallow a cancel.)
        halt = asyncio.Event()
        helpers = [
            asyncio.create_task(self._wake.set_when(stopping, halt), name="executor-stopping"),
            keeper,
            asyncio.create_task(self._gate.report_open(self._metrics,
                                                       self._settings.gauge_seconds),
                                name="executor-gauges"),
        ]
        writer = asyncio.create_task(self._writer.run(), name="executor-writer")
        claims = asyncio.create_task(self._claim_loops(halt), name="executor-claims")
        try:
            crashed = await first_failure(claims, [writer, keeper])
            if crashed is not None:
                await self._abandon_after_crash(crashed, claims, halt)
            await self._drain()
        finally:
            halt.set()
            self._wake.set()
            claims.cancel()
            self._writer.close()
            try:
                if not writer.done():
                    # The last results get the time _drain kept for them. The writer retries
                    # for as long as the database is away, so it is bounded here: results
                    # still unwritten are lost like a crashed replica's (their leases expire).
                    await asyncio.wait([writer], timeout=min(2.0, self._settings.grace_seconds * 0.25) or 0.1)
            finally:
                writer.cancel()
                for task in helpers:
                    task.cancel()
                await asyncio.gather(*helpers, claims, writer, return_exceptions=True)

    async def _abandon_after_crash(
        self, crashed: asyncio.Task[None], claims: asyncio.Task[None], halt: asyncio.Event
    ) -> None:
        """One of the executor's loops died: stop delivering and raise, naming it.

        In-flight requests are cancelled and nothing more is claimed; the leases are not
        renewed any more, so they expire and any replica re-claims those runs (whether an
        attempt counts is the claim's rule: only a request that started does)."""
        name = crashed.get_name()
        error = None if crashed.cancelled() else crashed.exception()
        log.error("executor loop %s crashed; abandoning %d deliveries in flight and "
                  "stopping the executor", name, len(self._deliveries), exc_info=error)
        halt.set()  # claim nothing more
        self._wake.set()
        await asyncio.wait([claims], timeout=self._settings.grace_seconds)
        await abandon(self._deliveries, self._settings.grace_seconds)
        raise LoopCrashed(name) from error

    # -- claiming --------------------------------------------------------------------

    async def _claim_loops(self, stopping: asyncio.Event) -> None:
        self._wake.watch(stopping)
        # The first loop claims as a single loop would; the others join in only while
        # claims come back full (a backlog), so an idle or held-back executor claims, and
        # backs off, exactly as with one loop.
        await all_or_none([self._claim_until(stopping, follower=i > 0)
                           for i in range(self._claims_at_once)])

    async def _claim_until(self, stopping: asyncio.Event, follower: bool = False) -> None:
        poll, batch = self._settings.poll_seconds, self._settings.batch
        while not stopping.is_set():
            if follower and not self._backlogged:
                await self._wake.pause(poll)  # a finished delivery wakes it too
                continue
            idle = await self._idle_slots(stopping)
            if idle <= 0:
                continue
            limit = min(idle, batch, self._claim_share)
            self._reserved += limit
            try:
                leased = await self._claim_once(limit)
            finally:
                self._reserved -= limit  # leased runs count as delivering now
            self._backlogged = leased == limit
            if leased is None:
                await self._wake.pause(poll)  # the claim failed (logged)
            elif leased < limit:
                # Nothing more now: until the next run is due, a freed slot or a hint.
                await self._wake.wait_for_work(await self._until_next_due(), self._claims)

    async def _claim_once(self, limit: int) -> int | None:
        """One claim of at most ``limit`` runs, started at once; how many it leased, or
        None when the claim failed."""
        asked_at = self._clock.now()
        lease_seconds = self._settings.lease_seconds
        # Read before the claim leaves: no stall after this line can move it later.
        send_by = send_deadline(self._clock.monotonic(), lease_seconds)
        claim_started = time.time_ns() if self._tracer.enabled else 0
        try:
            batch = await self._claims.claim(self._settings.owner, limit, lease_seconds)
        except StorageError:
            log.warning("claim failed; retrying in %.2fs", self._settings.poll_seconds,
                        exc_info=True)
            return None
        for status in batch.ended:  # ended by the claim itself (exhausted, cancelled)
            self._metrics.run_finished(str(status))
        runs = batch.runs
        if runs:
            # Every lease of a claim expires at the database's now() + lease_seconds.
            self._database_clock.measured(
                asked_at, runs[0].lease_expires_at - timedelta(seconds=lease_seconds))
            for source, count in batch.sources or ((self._claims.name, len(runs)),):
                self._metrics.claims(source, count)
            if self._tracer.enabled:
                self._tracer.claim(claim_started, time.time_ns(), source=self._claims.name,
                                   runs=runs)
            await self._admit(runs, send_by)
        return len(runs)

    async def _until_next_due(self) -> float:
        """How long to wait before the next claim: until the earliest planned run is due,
        at most one poll interval (retries, manual triggers and expired leases appear
        without notice), and at least 10 ms so a due run another replica is claiming right
        now cannot make this loop spin."""
        try:
            seconds = await self._claims.seconds_until_due()
        except StorageError:
            return self._settings.poll_seconds
        if seconds is None:
            return self._settings.poll_seconds
        return min(self._settings.poll_seconds, max(0.01, seconds))

    async def _idle_slots(self, stopping: asyncio.Event) -> int:
        """Slots free to start a delivery now (lease rule 1), waiting briefly for more.

        Results not yet written count against the slots beyond one write batch, so a
        slow database slows claiming instead of growing the buffer without bound."""
        deadline: float | None = None
        workers, max_write_batch = self._settings.workers, self._settings.max_write_batch
        while not stopping.is_set():
            backlog = max(0, self._writer.backlog - max_write_batch)
            idle = workers - len(self._deliveries) - backlog - self._reserved
            if idle >= self._claim_threshold:
                return idle
            now = self._clock.monotonic()
            if idle > 0:
                deadline = deadline if deadline is not None else now + GATHER_SECONDS
                if now >= deadline:
                    return idle
                await self._wake.pause(deadline - now)
            else:
                await self._wake.pause(self._settings.poll_seconds)
        return 0

    async def _admit(self, runs: Sequence[ClaimedRun], send_by: float) -> None:
        """Start every run whose target's breaker lets it through; defer the others."""
        self._signals.claimed.add(run.id for run in runs)
        admitted = await self._gate.sort(runs)
        for run, breaker_key in admitted.deliver:
            self._deliveries.start(run, breaker_key, send_by)
        for until, group in admitted.defer.items():
            await self._defer(group, until)

    async def _defer(self, runs: list[ClaimedRun], until: datetime) -> None:
        """Back to the queue until ``until`` without consuming an attempt (predicated)."""
        try:
            await self._runs.defer(
                self._settings.owner, [(r.id, r.scheduled_for, r.lease_generation) for r in runs], until
            )
        except StorageError:
            log.warning("deferring %d runs failed; their leases will expire", len(runs),
                        exc_info=True)
            return
        self._signals.deferred.add(run.id for run in runs)

    # -- shutdown --------------------------------------------------------------------

    async def _drain(self) -> None:
        await drain(self._deliveries, grace=self._settings.grace_seconds, runs=self._runs,
                    owner=self._settings.owner, keeper=self._keeper, signals=self._signals)
