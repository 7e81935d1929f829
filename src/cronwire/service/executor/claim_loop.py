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
import random
import time
from collections.abc import Sequence
from datetime import datetime, timedelta

from cronwire.domain.breaker import BreakerPolicy
from cronwire.domain.errors import StorageError
from cronwire.domain.model import ClaimedRun
from cronwire.domain.retry import Uniform
from cronwire.ports import BreakerStore, ClaimSource, Clock, Deliverer, Metrics, RunStore, Tracer
from cronwire.ports.observability import TRACING_OFF
from cronwire.service.executor.breaker_gate import BreakerGate, report_open_breakers
from cronwire.service.executor.claim_wake import ClaimWake
from cronwire.service.executor.deliveries import Deliveries
from cronwire.service.executor.drain import abandon, drain
from cronwire.service.executor.lease_keeper import LeaseKeeper, send_deadline
from cronwire.service.executor.resolution_writer import ResolutionWriter
from cronwire.service.signals import ExecutorSignals, quiet_signals
from cronwire.service.supervisor import LoopCrashed, all_or_none, first_failure

log = logging.getLogger("cronwire.service.executor")  # the package: drain.py logs as it


class Executor:
    def __init__(
        self,
        claim_source: ClaimSource,
        run_store: RunStore,
        breaker_store: BreakerStore,
        deliverer: Deliverer,
        metrics: Metrics,
        clock: Clock,
        *,
        owner: str,
        workers: int,
        batch: int,
        lease_seconds: float,
        delivery_timeout: float,
        grace_seconds: float,
        breaker_policy: BreakerPolicy | None = None,
        poll_seconds: float = 0.25,
        gauge_seconds: float = 2.0,
        max_write_batch: int = 500,
        rng: Uniform | None = None,
        signals: ExecutorSignals | None = None,
        tracer: Tracer | None = None,
    ) -> None:
        self._claims = claim_source
        self._runs = run_store
        self._breakers = breaker_store
        self._metrics = metrics
        self._clock = clock
        self._owner = owner
        self._workers = workers
        self._batch = batch
        self._lease_seconds = lease_seconds
        self._grace = grace_seconds
        self._policy = breaker_policy or BreakerPolicy()
        self._poll = poll_seconds
        self._gauge_seconds = gauge_seconds
        self._max_write_batch = max_write_batch
        self._signals = signals or quiet_signals()
        # Off: the hot path reads this one attribute and calls nothing else (ADR 0035).
        self._tracer: Tracer = tracer or TRACING_OFF
        # Claim when a quarter of the slots are idle, or after a short gathering wait:
        # fewer, larger claims at full load; no starvation when most slots are busy.
        self._claim_threshold = max(1, min(batch, workers) // 4)
        # Claims in flight at once (ADR 0042): while one claim runs in Postgres, the next
        # is already asked, each for its share of the slots. A source that keeps state
        # between claims (kafka mode's consumed keys) says 1.
        self._claims_at_once = max(1, claim_source.claims_at_once)
        self._claim_share = -(-workers // self._claims_at_once)
        self._reserved = 0  # slots promised to claims in flight
        self._backlogged = False  # the last claim came back full: more are due
        self._gather_seconds = 0.005
        self._wake = ClaimWake()
        self._keeper = LeaseKeeper(
            run_store, metrics, owner=owner, lease_seconds=lease_seconds, signals=self._signals,
        )
        self._gate = BreakerGate(
            breaker_store, owner=owner, policy=self._policy, probe_seconds=lease_seconds
        )
        self._writer = ResolutionWriter(
            run_store, breaker_store, self._keeper, metrics, owner=owner,
            breaker_policy=self._policy, lease_seconds=lease_seconds, signals=self._signals,
            max_batch=max_write_batch, tracer=self._tracer,
        )
        self._deliveries = Deliveries(
            deliverer, run_store, self._keeper, self._writer, metrics, clock, self._wake,
            owner=owner, delivery_timeout=delivery_timeout, rng=rng or random.Random(),
            signals=self._signals, tracer=self._tracer,
        )
        self._delivering = self._deliveries.leases

    @property
    def in_flight(self) -> int:
        return len(self._delivering)

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
            asyncio.create_task(report_open_breakers(self._breakers, self._metrics,
                                                     self._gauge_seconds),
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
                    await asyncio.wait([writer], timeout=min(2.0, self._grace * 0.25) or 0.1)
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
                  "stopping the executor", name, len(self._delivering), exc_info=error)
        halt.set()  # claim nothing more
        self._wake.set()
        await asyncio.wait([claims], timeout=self._grace)
        await abandon(self._delivering, self._grace)
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
        while not stopping.is_set():
            if follower and not self._backlogged:
                await self._wake.pause(self._poll)  # a finished delivery wakes it too
                continue
            idle = await self._idle_slots(stopping)
            if idle <= 0:
                continue
            limit = min(idle, self._batch, self._claim_share)
            self._reserved += limit
            try:
                leased = await self._claim_once(limit)
            finally:
                self._reserved -= limit  # leased runs count as delivering now
            self._backlogged = leased == limit
            if leased is None:
                await self._wake.pause(self._poll)  # the claim failed (logged)
            elif leased < limit:
                # Nothing more now: until the next run is due, a freed slot or a hint.
                await self._wake.wait_for_work(await self._until_next_due(), self._claims)

    async def _claim_once(self, limit: int) -> int | None:
        """One claim of at most ``limit`` runs, started at once; how many it leased, or
        None when the claim failed."""
        asked_at = self._clock.now()
        # Read before the claim leaves: no stall after this line can move it later.
        send_by = send_deadline(self._clock.monotonic(), self._lease_seconds)
        claim_started = time.time_ns() if self._tracer.enabled else 0
        try:
            batch = await self._claims.claim(self._owner, limit, self._lease_seconds)
        except StorageError:
            log.warning("claim failed; retrying in %.2fs", self._poll, exc_info=True)
            return None
        for status in batch.ended:  # ended by the claim itself (exhausted, cancelled)
            self._metrics.run_finished(str(status))
        runs = batch.runs
        if runs:
            # Every lease of a claim expires at the database's now() + lease_seconds.
            db_now = runs[0].lease_expires_at - timedelta(seconds=self._lease_seconds)
            self._deliveries.clock_offset = asked_at - db_now
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
            return self._poll
        if seconds is None:
            return self._poll
        return min(self._poll, max(0.01, seconds))

    async def _idle_slots(self, stopping: asyncio.Event) -> int:
        """Slots free to start a delivery now (lease rule 1), waiting briefly for more.

        Results not yet written count against the slots beyond one write batch, so a
        slow database slows claiming instead of growing the buffer without bound."""
        deadline: float | None = None
        while not stopping.is_set():
            backlog = max(0, self._writer.backlog - self._max_write_batch)
            idle = self._workers - len(self._delivering) - backlog - self._reserved
            if idle >= self._claim_threshold:
                return idle
            now = self._clock.monotonic()
            if idle > 0:
                deadline = deadline if deadline is not None else now + self._gather_seconds
                if now >= deadline:
                    return idle
                await self._wake.pause(deadline - now)
            else:
                await self._wake.pause(self._poll)
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
                self._owner, [(r.id, r.scheduled_for, r.lease_generation) for r in runs], until
            )
        except StorageError:
            log.warning("deferring %d runs failed; their leases will expire", len(runs),
                        exc_info=True)
            return
        self._signals.deferred.add(run.id for run in runs)

    # -- shutdown --------------------------------------------------------------------

    async def _drain(self) -> None:
        await drain(self._delivering, grace=self._grace, runs=self._runs, owner=self._owner,
                    keeper=self._keeper, signals=self._signals)
