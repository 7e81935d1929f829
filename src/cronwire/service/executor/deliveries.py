"""The executor's requests in flight: one per claimed run the breaker let through, started
without a task where the deliverer can (``begin``, docs/benchmarks.md#levers), else in a task of its own.

Each request leaves only inside its claim's send window (``send_deadline``): a replica
stalled between its claim and the send gives the run back unsent rather than send after
another replica may have re-claimed it. A request whose lease the keeper finds lost is
cancelled and its result discarded; every other result goes to the resolution writer,
together with the fire lag and duration figures.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta
from functools import partial
from typing import Any

from cronwire.domain.attempts import aborted_as_superseded, internal_failure, request_for
from cronwire.domain.breaker import health_signal
from cronwire.domain.delivery import DeliveryResult
from cronwire.domain.errors import RequestNotSent, StorageError
from cronwire.domain.model import ClaimedRun
from cronwire.domain.retry import Uniform, resolve_attempt
from cronwire.ports import Clock, Deliverer, Metrics, RunStore, StartsDeliveries, Tracer
from cronwire.ports.observability import TRACING_OFF
from cronwire.service.executor.claim_wake import ClaimWake
from cronwire.service.executor.lease_keeper import Lease, LeaseKeeper
from cronwire.service.executor.resolution_writer import Finished, ResolutionWriter
from cronwire.service.signals import ExecutorSignals

log = logging.getLogger("cronwire.service.executor")


class Deliveries:
    def __init__(
        self,
        deliverer: Deliverer,
        run_store: RunStore,
        keeper: LeaseKeeper,
        writer: ResolutionWriter,
        metrics: Metrics,
        clock: Clock,
        wake: ClaimWake,
        *,
        owner: str,
        delivery_timeout: float,
        rng: Uniform,
        signals: ExecutorSignals,
        tracer: Tracer = TRACING_OFF,
    ) -> None:
        self._deliverer = deliverer
        # Started without a task where it can be; never while tracing (its span wraps the
        # awaited attempt).
        self._begin = (deliverer.begin if isinstance(deliverer, StartsDeliveries)
                       and not tracer.enabled else None)
        self._runs = run_store
        self._keeper = keeper
        self._writer = writer
        self._metrics = metrics
        self._clock = clock
        self._wake = wake  # a finished delivery frees a slot: the claim loop may claim again
        self._owner = owner
        self._delivery_timeout = delivery_timeout
        self._rng = rng
        self._signals = signals
        # Off: the hot path reads this one attribute and calls nothing else (ADR 0035).
        self._tracer = tracer
        self.leases: set[Lease] = set()  # the requests in flight
        # asyncio.create_task asks get_running_loop(), which asks getpid(): a system call
        # per delivery. The loop is asked once, at the first delivery, instead.
        self._loop: asyncio.AbstractEventLoop | None = None
        # Replica clock minus the database's, measured by the claim loop at each claim:
        # fire lag is a database-clock figure (scheduled_for is one), so the replica's
        # send time is corrected by it. Off by at most the claim's latency.
        self.clock_offset = timedelta(0)

    def start(self, run: ClaimedRun, breaker_key: str, send_by: float) -> None:
        """Send ``run`` now under the lease this replica holds: written before this returns
        where the deliverer can begin it, else from a task of its own."""
        stale = self._keeper.get(run.id)
        if stale is not None and stale.in_flight and stale.task is not None:
            # Our own earlier lease on this run expired and the claim handed it back to us:
            # that older request is the one to abandon.
            self._keeper.lose(stale)
        lease = Lease(run.id, run.scheduled_for, run.lease_generation,
                      cancel_other=run.cancel_other)
        loop = self._loop
        if loop is None:
            loop = self._loop = asyncio.get_running_loop()
        begun = self._begun(run, lease, breaker_key, send_by, loop)
        lease.task = (begun if begun is not None
                      else loop.create_task(self._deliver(run, lease, breaker_key, send_by)))
        self.leases.add(lease)
        self._keeper.hold(lease)

    def _begun(self, run: ClaimedRun, lease: Lease, breaker_key: str, send_by: float,
               loop: asyncio.AbstractEventLoop) -> asyncio.Future[Any] | None:
        """The attempt as the deliverer began it, without a task (or a task giving the run
        back, when the deliverer found its send window closed); None where a task must
        deliver it."""
        begin = self._begin
        if begin is None or self._clock.monotonic() > send_by:
            return None
        try:
            started = begin(request_for(run, self._delivery_timeout, send_by, None))
        except RequestNotSent:  # nothing was sent
            return loop.create_task(self._given_back(lease))
        except Exception:  # nothing was written (begin's promise): the task's attempt
            return None  # meets the same failure and records it
        if started is None:
            return None
        self._signals.started.add([run.id])
        lease.started = True  # the next renewal records it (the attempt is used)
        if lease.cancel_other:
            lease.sent_at = self._clock.now()
        started.add_done_callback(partial(self._answered, run, lease, breaker_key))
        return started

    async def _deliver(
        self, run: ClaimedRun, lease: Lease, breaker_key: str, send_by: float
    ) -> None:
        try:
            if self._clock.monotonic() > send_by:
                await self._give_back_unsent(lease)
                return
            self._signals.started.add([run.id])
            lease.started = True  # the next renewal records it (the attempt is used)
            if lease.cancel_other:
                lease.sent_at = self._clock.now()
            try:
                result = await self._attempt(run, send_by)
            except RequestNotSent:
                # The deliverer found the same window closed just before writing.
                await self._give_back_unsent(lease)
                return
        except asyncio.CancelledError:
            if lease.superseded and not lease.lost:  # aborted by the keeper: a newer
                self._finish_aborted(run, lease, breaker_key)  # occurrence started
                return
            if not lease.lost:
                raise
            # Abandoned: the result is discarded, the loss was counted when it was found.
            self._signals.abandoned.add([run.id])
            return
        finally:
            self.leases.discard(lease)
            self._wake.set()
        self._finish(run, lease, breaker_key, result)

    def _answered(self, run: ClaimedRun, lease: Lease, breaker_key: str,
                  started: asyncio.Future[DeliveryResult]) -> None:
        """The end of an attempt the deliverer began without a task (what ``_deliver``
        does after its ``await``)."""
        self.leases.discard(lease)
        self._wake.set()
        if started.cancelled():
            if lease.superseded and not lease.lost:  # aborted: a newer occurrence started
                self._finish_aborted(run, lease, breaker_key)
            elif lease.lost:  # abandoned: the loss was counted when it was found
                self._signals.abandoned.add([run.id])
            return
        exc = started.exception()
        if exc is None:
            result = started.result()
        else:
            log.error("deliverer failed for run %s", run.id, exc_info=exc)
            now = self._clock.now()
            result = internal_failure(exc, now, now)
        self._finish(run, lease, breaker_key, result)

    def _finish(self, run: ClaimedRun, lease: Lease, breaker_key: str,
                result: DeliveryResult) -> None:
        """The attempt's figures, and its result to the resolution writer."""
        if lease.lost:
            return
        if run.attempt == 1:  # on the database's clock, like scheduled_for
            started_at = result.started_at - self.clock_offset
            self._metrics.fire_lag((started_at - run.scheduled_for).total_seconds())
        self._metrics.delivery_duration(result.duration_ms / 1000)
        resolution = resolve_attempt(run, result, self._rng)
        # A keyed run's 429/503 with Retry-After holds its whole key (ADR 0040): the
        # receiver said when to come back, so the breaker does not count it as sick too.
        held = run.flow_key is not None and resolution.hold_seconds is not None
        self._writer.submit(
            Finished(run, lease, resolution, breaker_key, None if held else health_signal(result))
        )

    def _finish_aborted(self, run: ClaimedRun, lease: Lease, breaker_key: str) -> None:
        """A cancel_other request the keeper aborted because a newer occurrence started:
        written cancelled, and no health signal (the receiver did nothing wrong)."""
        now = self._clock.now()
        resolution = aborted_as_superseded(run, lease.sent_at or now, now)
        self._writer.submit(Finished(run, lease, resolution, breaker_key, None))

    async def _given_back(self, lease: Lease) -> None:
        try:
            await self._give_back_unsent(lease)
        finally:
            self.leases.discard(lease)
            self._wake.set()

    async def _give_back_unsent(self, lease: Lease) -> None:
        """Abandon a lease whose request never left: nothing was sent, so no attempt is
        used. Released where it is still ours (due again at once); otherwise its new owner
        has it."""
        self._keeper.lose(lease, unsent=True)
        log.warning("run %s: lease too old to send (stalled?); not sent, given back",
                    lease.run_id, extra={"run_id": str(lease.run_id)})
        try:
            await self._runs.release(self._owner, [lease.key])
        except StorageError:
            log.warning("releasing unsent run %s failed; its lease will expire", lease.run_id,
                        exc_info=True)

    async def _attempt(self, run: ClaimedRun, send_by: float | None = None) -> DeliveryResult:
        """One request. The Deliverer enforces the per-attempt timeout (its contract
        suite tests it) and reports failures as outcomes; should it raise anyway, the
        attempt is recorded as a retryable failure rather than leaving a lease that is
        renewed for ever with nothing in flight."""
        started_at = self._clock.now()
        tracing = self._tracer.enabled
        request = request_for(run, self._delivery_timeout, send_by,
                              self._tracer.traceparent(run) if tracing else None)
        try:
            result = await self._deliverer.deliver(request)
        except RequestNotSent:
            raise
        except Exception as exc:
            log.exception("deliverer raised for run %s", run.id)
            result = internal_failure(exc, started_at, self._clock.now())
        if tracing:
            self._tracer.attempt(run, request, result)
        return result
