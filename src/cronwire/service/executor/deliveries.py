"""The executor's requests in flight: one per claimed run the breaker let through, started
without a task where the deliverer can (``begin``, docs/benchmarks.md#levers), else in a task of its own.

Each request leaves only inside its claim's send window (``send_deadline``): a replica
stalled between its claim and the send gives the run back unsent rather than send after
another replica may have re-claimed it. A request whose lease the keeper finds lost is
cancelled and its result discarded; every other result goes to the resolution writer,
together with the fire lag and duration figures.

Both ways of starting end the same way: the begun future and the task are each an
attempt future with one done callback, ``_completed``, which frees the slot and records
what came of the attempt.
"""

from __future__ import annotations

import asyncio
import logging
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
from cronwire.service.executor.database_clock import DatabaseClock
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
        database_clock: DatabaseClock,
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
        self._database_clock = database_clock  # fire lag is on the database's clock
        self._owner = owner
        self._delivery_timeout = delivery_timeout
        self._rng = rng
        self._signals = signals
        # Off: the hot path reads this one attribute and calls nothing else (ADR 0035).
        self._tracer = tracer
        self._in_flight: set[Lease] = set()  # the requests in flight, this object's alone
        # asyncio.create_task asks get_running_loop(), which asks getpid(): a system call
        # per delivery. The loop is asked once, at the first delivery, instead.
        self._loop: asyncio.AbstractEventLoop | None = None

    def __len__(self) -> int:
        """Requests in flight: the delivery slots taken."""
        return len(self._in_flight)

    def in_flight(self) -> list[Lease]:
        """The leases whose requests are in flight now (a copy)."""
        return list(self._in_flight)

    def start(self, run: ClaimedRun, breaker_key: str, send_by: float) -> None:
        """Send ``run`` now under the lease this replica holds: written before this returns
        where the deliverer can begin it, else from a task of its own. Either way the
        attempt ends in :meth:`_completed`."""
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
        attempt = self._begun(run, lease, send_by, loop)
        if attempt is None:
            attempt = loop.create_task(self._deliver(run, lease, send_by))
        attempt.add_done_callback(partial(self._completed, run, lease, breaker_key))
        lease.attach(attempt)
        self._in_flight.add(lease)
        self._keeper.hold(lease)

    def _begun(self, run: ClaimedRun, lease: Lease, send_by: float,
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
            return loop.create_task(self._give_back_unsent(lease))
        except Exception:  # nothing was written (begin's promise): the task's attempt
            return None  # meets the same failure and records it
        if started is not None:
            self._sending(run, lease)
        return started

    async def _deliver(
        self, run: ClaimedRun, lease: Lease, send_by: float
    ) -> DeliveryResult | None:
        """The attempt in a task of its own; None when its run was given back unsent."""
        if self._clock.monotonic() > send_by:
            await self._give_back_unsent(lease)
            return None
        self._sending(run, lease)
        try:
            return await self._attempt(run, send_by)
        except RequestNotSent:
            # The deliverer found the same window closed just before writing.
            await self._give_back_unsent(lease)
            return None

    def _sending(self, run: ClaimedRun, lease: Lease) -> None:
        self._signals.started.add([run.id])
        lease.sending(self._clock.now() if lease.cancel_other else None)

    def _completed(self, run: ClaimedRun, lease: Lease, breaker_key: str,
                   attempt: asyncio.Future[Any]) -> None:
        """Where every delivery ends, begun without a task or awaited in one: its slot
        is freed, then what came of it is recorded. A cancelled attempt was aborted by the
        keeper (a newer occurrence started: written cancelled), or abandoned with its
        lease (the loss was counted when it was found), or stopped at shutdown (its lease
        is released by the drain)."""
        self._in_flight.discard(lease)
        self._wake.set()
        if attempt.cancelled():
            if lease.superseded and not lease.lost:
                self._finish_aborted(run, lease, breaker_key)
            elif lease.lost and lease.started:  # an unsent one was signalled when given back
                self._signals.abandoned.add([run.id])
            return
        exc = attempt.exception()
        if exc is None:
            result: DeliveryResult | None = attempt.result()
            if result is None:  # given back unsent: no attempt to record
                return
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
            started_at = self._database_clock.to_database(result.started_at)
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
