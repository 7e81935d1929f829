"""Keeps this replica's leases alive while their requests are in flight (lease rule 2).

All leases are renewed together in ONE statement every ``lease_seconds / 3`` seconds, not
one per run. A lease the renewal cannot find any more (reaped and re-claimed by another
replica, or finished by someone else) is lost: its request is cancelled and its result
discarded, because writing it would record a second executor's outcome for the run.
:meth:`LeaseKeeper.lose` is the one place a lost lease is counted, whoever finds it: the
renewal, the resolution writer (a write that no longer matched), or the claim loop (a
request too late to send, or an older lease of a run claimed again).

The same statement records which leases' requests have started (the claim's exhaustion
rule counts only attempts that started), so that costs no round trip of its own. A
renewal that fails (a database outage) is retried soon, with backoff, rather than a
whole interval later: a lease outlives an outage shorter than itself only if the first
renewal after the outage comes before it expires.

A lease of a cancel_other run whose request is in flight is also checked every
``SUPERSEDED_POLL_SECONDS`` (one statement for all of them, none while there are none):
once a newer occurrence of its schedule started, on this replica or another, the request
is aborted (its connection closed) and the run written cancelled, so at most one request
of the schedule stays in flight. The poll, not the renewal, bounds how long the two
overlap: the renewal interval is a third of the lease, tens of seconds by default.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from cronwire.domain.model import LeaseKey
from cronwire.ports import Metrics, RunStore
from cronwire.service.periodic import every
from cronwire.service.signals import ExecutorSignals, quiet_signals

log = logging.getLogger(__name__)
RENEW_RETRY_SECONDS = 0.25  # first retry after a failed renewal; doubles up to the interval
# How soon a superseded cancel_other request is aborted at most (plus one round trip):
# short, because until then the schedule has two requests in flight; a poll costs one
# small statement per replica, and only while a cancel_other request is in flight.
SUPERSEDED_POLL_SECONDS = 0.5


@dataclass(slots=True, eq=False)
class Lease:
    """One held lease; ``task`` is its delivery while the request is in flight (a task, or
    the future of an attempt the deliverer began without one)."""

    run_id: UUID
    scheduled_for: datetime
    generation: int = 0
    task: asyncio.Future[Any] | None = None
    lost: bool = False
    started: bool = False  # the request has been handed to the deliverer
    cancel_other: bool = False  # its schedule's overlap_policy: checked for supersession
    superseded: bool = False  # aborted because a newer occurrence started: write it cancelled
    sent_at: datetime | None = None  # when its request started (cancel_other leases only)

    @property
    def key(self) -> LeaseKey:
        return (self.run_id, self.scheduled_for, self.generation)

    @property
    def in_flight(self) -> bool:
        return self.task is not None and not self.task.done()

    # Its changes, each made by the one party that knows of it: the deliveries attach the
    # request and say when it leaves; the keeper finds the lease lost or superseded.

    def attach(self, attempt: asyncio.Future[Any]) -> None:
        self.task = attempt

    def sending(self, now: datetime | None) -> None:
        """Its request is handed to the deliverer: the attempt is used (the next renewal
        records it). ``now`` is kept as its start (cancel_other leases only)."""
        self.started = True
        self.sent_at = now

    def mark_lost(self) -> None:
        self.lost = True

    def mark_superseded(self) -> None:
        self.superseded = True


def send_deadline(asked_at_monotonic: float, lease_seconds: float) -> float:
    """The monotonic instant after which no request of a claim asked at
    ``asked_at_monotonic`` may leave: half its lease later.

    Normally a request leaves right after its claim. A replica stalled in between
    (SIGSTOP, a long pause of the event loop) may wake after its lease expired and
    another replica re-claimed and delivered the run; sending then would be a second
    delivery that no renewal could stop, because the renewal that would find the lease
    gone comes later. Every lease of a claim expires a full lease after the database ran
    the claim, which is after it was asked, so half a lease after asking leaves the other
    half as the margin. The deadline is fixed before the claim is sent and is an instant,
    not a duration: a stall anywhere after that reading (during the claim's round trip,
    before the delivery task ran, between the executor's check and the deliverer's) only
    uses up the window, never stretches it (ADR 0022). The deadline is on the Clock's
    ``monotonic``: ``time.monotonic()`` for the system
    clock (and the chaos suite's skewed one), which is what the lean deliverer reads."""
    return asked_at_monotonic + lease_seconds / 2


class LeaseKeeper:
    def __init__(
        self,
        run_store: RunStore,
        metrics: Metrics,
        *,
        owner: str,
        lease_seconds: float,
        signals: ExecutorSignals | None = None,
    ) -> None:
        self._store = run_store
        self._metrics = metrics
        self._owner = owner
        self._lease_seconds = lease_seconds
        self._signals = signals or quiet_signals()
        self._held: dict[UUID, Lease] = {}

    @property
    def interval(self) -> float:
        return self._lease_seconds / 3

    def hold(self, lease: Lease) -> None:
        self._held[lease.run_id] = lease

    def drop(self, lease: Lease) -> None:
        if self._held.get(lease.run_id) is lease:
            del self._held[lease.run_id]

    def get(self, run_id: UUID) -> Lease | None:
        return self._held.get(run_id)

    def __len__(self) -> int:
        return len(self._held)

    def lose(self, lease: Lease, *, unsent: bool = False) -> None:
        """Count ``lease`` lost (scheduler_lease_lost_total) and let it go. A request still
        in flight is cancelled and its result discarded (signalled ``lost``). A lease given
        up before its request left (``unsent``: its send window had closed) is signalled
        ``abandoned``; nothing is cancelled, the caller being that delivery itself."""
        lease.mark_lost()
        self.drop(lease)
        self._metrics.lease_lost()
        if unsent:
            self._signals.abandoned.add([lease.run_id])
            return
        self._signals.lost.add([lease.run_id])
        if lease.in_flight and lease.task is not None:
            lease.task.cancel()

    async def run(self) -> None:
        """Renew until cancelled. A failed renewal does not prove a lease lost: it is
        logged and retried after a short backoff (at most one interval) for as long as the
        database stays away. A lease that expired meanwhile but was not re-claimed is
        still ours and is renewed; one re-claimed elsewhere is found gone."""
        await asyncio.gather(
            every(self.interval, None, self.renew, "lease renewal",
                  first_delay=self.interval, backoff=self._retry_after),
            every(self.superseded_poll, None, self.abort_superseded,
                  "superseded-run check", first_delay=self.superseded_poll),
        )

    @property
    def superseded_poll(self) -> float:
        return min(SUPERSEDED_POLL_SECONDS, self.interval)

    async def abort_superseded(self) -> None:
        """Abort the requests in flight of cancel_other runs a newer occurrence superseded.
        The lease stays ours: the delivery, cancelled, writes the run cancelled itself
        (unless its complete answer had already arrived, which is then recorded)."""
        # Only requests that left: one not yet sent is checked at the next poll (or finds
        # its run cancelled by the claim when it is given back).
        watched = [lease for lease in self._held.values()
                   if lease.cancel_other and lease.started and lease.in_flight
                   and not lease.superseded]
        if not watched:
            return
        found = await self._store.superseded(self._owner, [lease.key for lease in watched])
        for lease in watched:
            if (lease.run_id in found and lease.in_flight and lease.task is not None
                    and self._held.get(lease.run_id) is lease):
                lease.mark_superseded()
                lease.task.cancel()

    def _retry_after(self, failures: int) -> float:
        return min(self.interval, RENEW_RETRY_SECONDS * float(2 ** min(failures - 1, 8)))

    async def renew(self) -> None:
        leases = list(self._held.values())
        if not leases:
            return
        still_ours = await self._store.renew_leases(
            self._owner, [lease.key for lease in leases], self._lease_seconds,
            {lease.run_id for lease in leases if lease.started},
        )
        self._signals.renewals.add([len(still_ours)])
        for lease in leases:
            if lease.run_id in still_ours or self._held.get(lease.run_id) is not lease:
                continue
            # A lease whose request already finished is left to the resolution write: its
            # predicate decides, and it may well have landed just before this renewal ran.
            if lease.in_flight:
                self.lose(lease)
