"""Alerts' loop, on every replica whatever its roles (ADR 0036): check which
schedules became late, then deliver due alert events, durably.

Late is checked here, not by the executor, because it matters most when no executor is
healthy: any replica that runs at all (an api-only one too) notices that occurrences are
not starting, or not even being planned. Deliveries reuse what runs use: the Deliverer
(its address guard, timeouts, Standard Webhooks signing through the delivery headers),
the retry maths of :mod:`cronwire.domain.retry`, and a lease with a generation on every
write, so an event is sent by one replica at a time and its attempts are recorded.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable
from datetime import UTC, datetime

from cronwire.domain.alerts import (
    AlertResolution,
    ClaimedAlert,
    EventAttempt,
    alert_retry_policy,
    event_body,
)
from cronwire.domain.attempts import ERROR_BYTES, internal_failure, storable_text
from cronwire.domain.delivery import EXCERPT_BYTES, DeliveryRequest, DeliveryResult, Outcome
from cronwire.domain.errors import StorageError
from cronwire.domain.model import IDEMPOTENCY_KEY_PREFIX
from cronwire.domain.retry import clamp_attempts, honoured_retry_after, next_delay
from cronwire.ports import AlertOutbox, Deliverer, Metrics
from cronwire.service.periodic import every

log = logging.getLogger(__name__)
# Sends in flight on one replica at most: the claim takes no more than are free.
MAX_IN_FLIGHT = 50
# Sends in flight for one tenant across the fleet (the claim counts live leases on every
# replica): a tenant whose destination hangs holds these slots and no others (ADR 0055).
TENANT_IN_FLIGHT = 2
# A send is cut off this long after its delivery timeout should have ended it (a
# Deliverer that overstays must not hold a slot for ever); well inside its lease
# (2 x the timeout), so a cut-off send's result still lands.
HARD_BOUND_FACTOR = 1.5
# Planned occurrences are looked at this far before their rule's deadline: an older one
# still pending was flagged late when it passed the deadline (or its schedule is paused).
LATE_HORIZON_SECONDS = 3600.0


class AlertDispatcher:
    def __init__(self, outbox: AlertOutbox, deliverer: Deliverer, metrics: Metrics, *,
                 owner: str,
                 interval_seconds: float, delivery_timeout: float,
                 retry_initial_seconds: float,
                 max_in_flight: int = MAX_IN_FLIGHT,
                 tenant_in_flight: int = TENANT_IN_FLIGHT,
                 rng: Callable[[], random.Random] = random.Random) -> None:
        self._outbox = outbox
        self._deliverer = deliverer
        self._metrics = metrics
        self._owner = owner
        self._interval = interval_seconds
        self._timeout = delivery_timeout
        self._policy = alert_retry_policy(retry_initial_seconds)
        self._max_in_flight = max_in_flight
        self._tenant_in_flight = tenant_in_flight
        self._rng = rng()
        self._sending: set[asyncio.Task[None]] = set()
        self.passes = 0  # test signal: completed passes

    @property
    def in_flight(self) -> int:
        return len(self._sending)

    async def run(self, stopping: asyncio.Event) -> None:
        try:
            await every(self._interval, stopping, self.run_once, "alert check and delivery")
            await self.finish_sends()
        finally:
            for task in self._sending:  # cancelled: the leases expire, another replica retries
                task.cancel()

    async def run_once(self) -> int:
        """One pass: the late check and damped failing schedules' settling, then as many due events as this replica has free
        slots, each sent by a task of its own (the pass does not wait for them: a hanging
        destination holds only its own slots). Returns the events claimed."""
        created = await self._outbox.check_late(LATE_HORIZON_SECONDS)
        if created:
            log.info("alerts: %d schedule(s) became late", created)
        await self._outbox.tell_untold_failing()
        free = self._max_in_flight - len(self._sending)
        claimed = await self._outbox.claim(self._owner, free, 2 * self._timeout,
                                           self._tenant_in_flight) if free > 0 else []
        for item in claimed:
            task = asyncio.create_task(self._deliver(item), name=f"alert {item.event.id}")
            self._sending.add(task)
            task.add_done_callback(self._sending.discard)
        self.passes += 1
        return len(claimed)

    async def finish_sends(self) -> None:
        """Wait for the sends in flight; each ends within its hard bound."""
        if self._sending:
            await asyncio.wait(set(self._sending))

    async def _deliver(self, item: ClaimedAlert) -> None:
        event = item.event
        if item.url is None or item.signing_secret is None:
            await self._resolve(AlertResolution(event.id, item.lease_generation,
                                                "undelivered", None, None))
            return
        request = DeliveryRequest(
            run_id=event.id, schedule_id=event.schedule_id, tenant_id=event.tenant_id,
            idempotency_key=IDEMPOTENCY_KEY_PREFIX + event.id.hex, scheduled_for=event.at,
            attempt=clamp_attempts(event.attempt_count), method="POST", url=item.url,
            headers={}, body=event_body(event), signing_secrets=(item.signing_secret,),
            timeout_seconds=self._timeout)
        started_at = datetime.now(UTC)
        try:
            async with asyncio.timeout(HARD_BOUND_FACTOR * self._timeout):
                result = await self._deliverer.deliver(request)
        except Exception as exc:  # the Deliverer must not raise nor overstay; retry later
            log.warning("alert event %s: the deliverer raised or overstayed (%s)",
                        event.id, type(exc).__name__)
            result = internal_failure(exc, started_at, datetime.now(UTC))
        try:
            await self._resolve(self._resolution(item, result))
        except StorageError:  # the lease expires and the event is sent again
            log.warning("alert event %s: its result could not be written", event.id,
                        exc_info=True)

    def _resolution(self, item: ClaimedAlert, result: DeliveryResult) -> AlertResolution:
        attempt = clamp_attempts(item.event.attempt_count)
        evidence = EventAttempt(
            attempt=attempt, started_at=result.started_at, finished_at=result.finished_at,
            outcome=str(result.outcome), status_code=result.status_code,
            error=storable_text(result.error, ERROR_BYTES),
            duration_ms=max(0, result.duration_ms),
            response_excerpt=storable_text(result.response_excerpt, EXCERPT_BYTES))
        if result.outcome is Outcome.SUCCESS:
            status, delay = "delivered", None
        elif result.retryable and attempt < self._policy.max_attempts:
            status = "retrying"
            delay = next_delay(self._policy, attempt, honoured_retry_after(result), self._rng)
        else:
            status, delay = "failed", None
        return AlertResolution(item.event.id, item.lease_generation, status, delay, evidence)

    async def _resolve(self, resolution: AlertResolution) -> None:
        if not await self._outbox.resolve(self._owner, resolution):
            log.warning("alert event %s: lease lost before its result was written",
                        resolution.event_id)
            return
        self._metrics.alert_delivered(resolution.status)
        if resolution.status in ("failed", "retrying"):
            log.warning("alert event %s: delivery %s (%s)", resolution.event_id,
                        resolution.status, resolution.attempt.error if resolution.attempt
                        else "no destination")
