"""OutboxRelay: kafka mode's publisher loop over job_run.published_at.

Every replica in kafka mode runs one. A pass marks the due, unpublished, runnable runs
published (SKIP LOCKED, so relays split the work) and commits, then sends their keys in
one batch; the keys the broker did not acknowledge are unmarked and published by a later
pass of any replica (the republisher is this same loop). Keys a crash leaves marked but
unsent are the sweeper's after its grace (PostgresOutboxStore, ADR 0025). Runs
planned ahead and retries backing off are published when due, not before, so no key
reaches a consumer before its run can be claimed. While the broker is down the relay
waits; the sweeper claims in the meantime.

A pass publishes only runs due at most the sweeper's grace ago (when it is given): an
older unpublished run is one the sweeper takes at its next pass anyway, and its key would
arrive for a claim by key that finds nothing (ADR 0063).

While this replica's consumer is backlogged (``RunHints.backlogged``: a buffer's worth of
a partition's keys waits in the broker), a pass publishes only runs due less than
``BACKLOG_GRACE_SECONDS`` ago, at most ``BACKLOG_KEYS_PER_TENANT`` of each tenant's, and
the next pass comes after the poll interval. The older ones are what the
executor's fair polling claim takes in that state, so their keys would only arrive after
the run was claimed: each would cost a mark, a consumed message and a claim by key that
finds nothing (ADR 0025). The share and the pause keep a burst due at one instant (all of
it fresh for a second) from being published in that second (ADR 0063). Every due tenant's
first keys are still published each pass, so a quiet tenant's run due now is claimed by
its key, not a second later. Once the backlog clears, whatever is still unclaimed (and
within the sweeper's grace) is published as usual.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from cronwire.domain.backlog import BACKLOG_GRACE_SECONDS, BACKLOG_KEYS_PER_TENANT
from cronwire.domain.errors import BrokerError, StorageError
from cronwire.ports import OutboxStore, RunHints, RunPublisher

log = logging.getLogger(__name__)


class OutboxRelay:
    def __init__(
        self,
        store: OutboxStore,
        publisher: RunPublisher,
        *,
        hints: RunHints | None = None,
        sweep_grace_seconds: float | None = None,
        batch: int = 2000,
        poll_seconds: float = 0.2,
        retry_seconds: float = 1.0,
    ) -> None:
        self._store = store
        self._publisher = publisher
        self._hints = hints  # this replica's consumer; None where no executor runs
        # Runs overdue by more than the sweeper's grace are the sweeper's: a key published
        # for one would arrive for a run a sweep takes anyway (ADR 0063). At least the
        # backlog's grace, so a zero grace still leaves fresh runs to their keys.
        self._max_age = (None if sweep_grace_seconds is None
                         else max(sweep_grace_seconds, BACKLOG_GRACE_SECONDS))
        self._batch = batch
        self._poll = poll_seconds
        self._retry = retry_seconds
        self.published = 0  # keys marked published since start (tests, logs)

    async def run(self, stopping: asyncio.Event) -> None:
        while not stopping.is_set():
            wait = await self.step()
            if wait > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stopping.wait(), wait)

    async def step(self) -> float:
        """One pass; returns how long to wait before the next."""
        if not self._publisher.healthy:
            return self._retry
        backlogged = self._hints is not None and self._hints.healthy and self._hints.backlogged
        try:
            age, share = ((BACKLOG_GRACE_SECONDS, BACKLOG_KEYS_PER_TENANT) if backlogged
                          else (self._max_age, None))
            published = await self._store.publish_due(
                self._batch, self._publisher.publish, max_age_seconds=age, per_tenant=share)
        except BrokerError as exc:
            log.warning("publishing run keys failed, retrying in %ss: %s", self._retry, exc)
            return self._retry
        except StorageError as exc:
            log.warning("outbox pass failed, retrying in %ss: %s", self._retry, exc)
            return self._retry
        self.published += published
        if backlogged and published < self._batch:
            # Each due tenant had its share (older runs wait for the backlog to clear):
            # the next share after the poll interval, not a spin.
            return self._poll
        if published:
            # More may be due at once: a pass takes each due tenant's share (fair across
            # tenants), so a burst among several tenants fills less than a batch.
            return 0.0
        try:
            seconds = await self._store.seconds_until_unpublished_due()
        except StorageError:
            return self._poll
        if seconds is None or seconds <= 0:
            # None due, or the due ones were another relay's (locked) or are the
            # sweeper's (too old to publish): the next pass after the poll, not a spin.
            return self._poll
        # Retries, releases and manual triggers appear without notice: poll at least.
        return min(self._poll, max(0.01, seconds))
