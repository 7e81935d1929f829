"""HybridClaimSource: kafka mode's claim step — hints from the broker, the sweeper beside.

The executor does not know which mode it runs in; it sees a ClaimSource. Here:

* keys the consumer delivered are claimed in one statement per batch (``claim_keys``); the
  offsets are acknowledged only after that transaction committed, and a failed claim
  rewinds the consumer to its committed offsets;
* every ``sweep_seconds`` a SKIP LOCKED sweep claims runs due longer than the grace that
  no message delivered (broker restart, lost partition, crash before publish) and leases
  whose owner vanished — nothing depends on the broker being perfect;
* while the broker is unreachable the polling claim does all the work (labelled
  ``sweeper``), with no grace: nothing is being published, so nothing is worth waiting for.

``name`` is the label of the runs the most recent ``claim()`` returned
(scheduler_claims_total{source="kafka"|"sweeper"}); each call claims from one source.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from cronwire.domain.errors import StorageError
from cronwire.domain.model import ClaimedRun
from cronwire.ports import ClaimSource, Clock, KeyedClaimStore, RunHints

KAFKA = "kafka"
SWEEPER = "sweeper"


class HybridClaimSource:
    def __init__(
        self,
        hints: RunHints,
        keyed: KeyedClaimStore,
        polling: ClaimSource,
        clock: Clock,
        *,
        grace_seconds: float,
        sweep_seconds: float = 1.0,
    ) -> None:
        self._hints = hints
        self._keyed = keyed
        self._polling = polling
        self._clock = clock
        self._grace = grace_seconds
        self._sweep_seconds = sweep_seconds
        self._next_sweep = clock.monotonic() + sweep_seconds
        self._label = KAFKA

    @property
    def name(self) -> str:
        return self._label

    async def claim(self, owner: str, limit: int, lease_seconds: float) -> Sequence[ClaimedRun]:
        if limit <= 0:
            return []
        if not self._hints.healthy:
            self._label = SWEEPER
            return await self._polling.claim(owner, limit, lease_seconds)
        now = self._clock.monotonic()
        if now >= self._next_sweep:
            self._next_sweep = now + self._sweep_seconds
            swept = await self._keyed.sweep(owner, limit, lease_seconds, self._grace)
            if swept or swept.ended:  # a batch the claim only ended is counted too
                self._label = SWEEPER
                return swept
        keys = self._hints.take(limit)
        self._label = KAFKA
        if not keys:
            return []
        try:
            runs = await self._keyed.claim_keys(owner, keys, lease_seconds)
        except StorageError:
            self._hints.rewind()
            raise
        # Keys that found nothing claimable (finished, leased elsewhere, deleted) are
        # acknowledged with the rest: dropped, as a hint may be.
        self._hints.acknowledge()
        return runs

    async def seconds_until_due(self) -> float | None:
        """Degraded: the polling source's answer. Otherwise the time to the next sweep
        (hints end the executor's wait early through ``wait_for_work``)."""
        if not self._hints.healthy:
            return await self._polling.seconds_until_due()
        return max(0.0, self._next_sweep - self._clock.monotonic())

    async def wait_for_work(self, seconds: float) -> None:
        if not self._hints.healthy:
            await asyncio.sleep(seconds)
            return
        await self._hints.wait(seconds)

    async def close(self) -> None:
        return None  # the clients belong to the container's resources
