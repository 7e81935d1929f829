"""HybridClaimSource: kafka mode's claim step — hints from the broker, the sweeper beside.

The executor does not know which mode it runs in; it sees a ClaimSource. Which step a
claim takes (degraded polling, the backlogged double claim, reclaiming held runs, the
sweep and its grace, keys, the overflow report) is decided by the pure policy in
``domain/kafka_claims.py``; this class executes the step against the ports and feeds the
results back. What execution itself guarantees:

* keys are acknowledged only after the claim of them committed (keys that found nothing
  claimable are dropped with them, as a hint may be); a failed claim of keys rewinds the
  consumer to its committed offsets;
* two claims may be in flight at once (ADR 0042), but only one takes keys: consumed keys
  are acknowledged or rewound as a whole, so a claim that finds the keys' step busy does
  what needs no keys or nothing (ADR 0063);
* when one of two statements run together fails, the other's leases are delivered
  rather than left to expire; a failed read of the peers' overflow counts as none and a
  failed overflow report is logged, and the claim stands.

Every batch says where its runs came from in ``ClaimBatch.sources``
(scheduler_claims_total{source="kafka"|"sweeper"}); a claim that draws on both names
both. ``name`` is the source's own label, "kafka", whatever a claim drew on.
"""

from __future__ import annotations

import asyncio
import logging

from cronwire.domain.errors import StorageError
from cronwire.domain.kafka_claims import (
    BacklogBoth,
    BesideKeys,
    Degraded,
    Idle,
    KafkaClaimPolicy,
    ReadPeer,
    Reclaim,
    ReportOverflow,
    Sweep,
)
from cronwire.domain.model import ClaimBatch
from cronwire.ports import ClaimSource, Clock, KeyedClaimStore, RunHints

log = logging.getLogger(__name__)

KAFKA = "kafka"
SWEEPER = "sweeper"


class HybridClaimSource:
    name = KAFKA
    # Two claims in flight, as in postgres mode (ADR 0042), but one step of keys at a time.
    claims_at_once = 2

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
        self._policy = KafkaClaimPolicy(grace_seconds, sweep_seconds)
        self._state = self._policy.start(clock.monotonic())
        # A claim is between taking keys and acknowledging (or rewinding) them.
        self._keys_busy = False

    async def claim(self, owner: str, limit: int, lease_seconds: float) -> ClaimBatch:
        opening = self._policy.opening(limit=limit, healthy=self._hints.healthy,
                                       backlogged=self._hints.backlogged,
                                       keys_busy=self._keys_busy)
        if isinstance(opening, Idle):
            return ClaimBatch()
        if isinstance(opening, Degraded):
            degraded = await self._polling.claim(owner, limit, lease_seconds)
            return degraded.labelled(SWEEPER)
        if isinstance(opening, BesideKeys):
            beside = await self._keyed.claim_fair(owner, limit, lease_seconds, opening.grace)
            return beside.labelled(SWEEPER)
        if isinstance(opening, BacklogBoth):
            both = await self._claim_backlogged(owner, limit, lease_seconds, opening)
            if both.runs or both.ended:
                return both
        now = self._clock.monotonic()
        self._state, step = self._policy.next_step(self._state, now)
        if isinstance(step, Reclaim):
            return await self._claim_reclaiming(owner, limit, lease_seconds, now, step)
        if isinstance(step, ReadPeer):
            self._state, step = self._policy.peer_read(self._state,
                                                       await self._peer_overflowing(owner))
        if isinstance(step, Sweep):
            swept = await self._keyed.sweep(owner, limit, lease_seconds, step.grace)
            self._state = self._policy.swept(
                self._state, now, limit=limit, found=len(swept.runs),
                flow_keys=any(run.flow_key is not None for run in swept.runs))
            if swept.runs or swept.ended:  # a batch the claim only ended is counted too
                return swept.labelled(SWEEPER)
        return await self._claim_keys(owner, limit, lease_seconds)

    async def _peer_overflowing(self, owner: str) -> bool:
        """A failed read counts as none: the sweep goes ahead with the full grace (and
        fails by itself if the database is away)."""
        try:
            return await self._keyed.peer_overflowing(owner)
        except StorageError:
            log.warning("reading the peers' overflow failed; sweeping with the full grace",
                        exc_info=True)
            return False

    async def _claim_keys(self, owner: str, limit: int, lease_seconds: float) -> ClaimBatch:
        if self._keys_busy:
            return ClaimBatch()  # the other claim in flight is taking keys
        keys = self._hints.take(limit)
        if not keys:
            # Whatever was taken was unreadable messages (skipped): settled, so their
            # offsets are committed even where no readable key ever follows them.
            self._hints.acknowledge()
            return ClaimBatch()
        self._keys_busy = True
        try:
            batch = await self._keyed.claim_keys(owner, keys, lease_seconds)
        except StorageError:
            self._hints.rewind()
            raise
        finally:
            self._keys_busy = False
        self._hints.acknowledge()
        await self._keys_claimed(owner, limit, len(keys), batch)
        return batch.labelled(KAFKA)

    async def _keys_claimed(self, owner: str, limit: int, taken: int, batch: ClaimBatch) -> None:
        """Feeds a claim of keys back to the policy; reports the overflow if it says so."""
        self._state, report = self._policy.keys_claimed(
            self._state, self._clock.monotonic(), limit=limit, taken=taken,
            leased=len(batch.runs), held=batch.held, keys_left=self._hints.buffered > 0)
        if isinstance(report, ReportOverflow):
            try:
                await self._keyed.report_overflow(owner, report.hold_seconds)
            except StorageError:
                log.warning("reporting this replica's overflow failed; its keys' overflow "
                            "waits for the sweepers' full grace", exc_info=True)

    async def _claim_reclaiming(self, owner: str, limit: int, lease_seconds: float,
                                now: float, step: Reclaim) -> ClaimBatch:
        reclaimed = await self._keyed.claim_fair(owner, limit, lease_seconds, step.grace)
        self._state = self._policy.reclaimed(self._state, now,
                                             found=bool(reclaimed.runs or reclaimed.ended))
        rest = limit - len(reclaimed.runs)
        keyed = ClaimBatch()
        if rest > 0:
            try:
                keyed = await self._claim_keys(owner, rest, lease_seconds)
            except StorageError:
                if not (reclaimed.runs or reclaimed.ended):
                    raise
                # The fair claim's leases are taken: deliver them rather than let them expire.
                log.warning("a claim of keys failed; the fair claim's runs go ahead",
                            exc_info=True)
        return _both(reclaimed, keyed)

    async def _claim_backlogged(self, owner: str, limit: int, lease_seconds: float,
                                step: BacklogBoth) -> ClaimBatch:
        keys = self._hints.take(step.key_limit)
        fair_limit = limit - len(keys)
        self._keys_busy = True
        try:
            fair, keyed = await asyncio.gather(
                self._keyed.claim_fair(owner, fair_limit, lease_seconds, step.grace)
                if fair_limit > 0 else _nothing(),
                self._keyed.claim_keys(owner, keys, lease_seconds) if keys else _nothing(),
                return_exceptions=True,
            )
        finally:
            self._keys_busy = False
        if isinstance(keyed, BaseException):
            self._hints.rewind()
        else:
            self._hints.acknowledge()
            await self._keys_claimed(owner, step.key_limit, len(keys), keyed)
        failed = [part for part in (fair, keyed) if isinstance(part, BaseException)]
        for failure in failed:
            if not isinstance(failure, StorageError):
                raise failure
        if len(failed) == 2:
            raise failed[0]
        if failed:
            # The other statement's leases are taken: deliver them rather than let them expire.
            log.warning("one of a backlogged claim's two statements failed; the other's runs "
                        "go ahead", exc_info=failed[0])
        return _both(ClaimBatch() if isinstance(fair, BaseException) else fair,
                     ClaimBatch() if isinstance(keyed, BaseException) else keyed)

    async def seconds_until_due(self) -> float | None:
        """Degraded: the polling source's answer. Otherwise the policy's: the time to the
        next sweep, or while reclaiming 10 ms doubling up to 40 ms per empty reclaim (hints
        end the executor's wait early through ``wait_for_work``)."""
        if not self._hints.healthy:
            return await self._polling.seconds_until_due()
        return self._policy.seconds_until_claim(self._state, self._clock.monotonic())

    async def wait_for_work(self, seconds: float) -> None:
        if not self._hints.healthy:
            await asyncio.sleep(seconds)
            return
        await self._hints.wait(seconds)

    async def close(self) -> None:
        return None  # the clients belong to the container's resources


def _both(fair: ClaimBatch, keyed: ClaimBatch) -> ClaimBatch:
    """A fair polling claim's batch and a claim of keys' batch as one, each counted for
    its source."""
    return ClaimBatch(fair.runs + keyed.runs, fair.ended + keyed.ended,
                      ((SWEEPER, len(fair.runs)), (KAFKA, len(keyed.runs))))


async def _nothing() -> ClaimBatch:
    return ClaimBatch()
