"""HybridClaimSource: kafka mode's claim step — hints from the broker, the sweeper beside.

The executor does not know which mode it runs in; it sees a ClaimSource. Here:

* keys the consumer delivered are claimed in one statement per batch (``claim_keys``); the
  offsets are acknowledged only after that transaction committed, and a failed claim
  rewinds the consumer to its committed offsets;
* every ``sweep_seconds`` a SKIP LOCKED sweep claims runs due longer than the grace that
  no message delivered (broker restart, lost partition, crash before publish) and leases
  whose owner vanished — nothing depends on the broker being perfect. A sweep that comes
  back full is followed by another at the next claim: runs past the grace are a busy
  peer's overflow (one tenant's keys all go to one partition, so one replica's slots
  bound that tenant's rate) or lost messages, and the fleet's idle slots drain them at
  their own pace, not one claim's worth a second (ADR 0063);
* a replica whose keys arrive faster than its delivery slots take them (every claim for a
  second took as many keys as it was let and left more, and most of them leased runs)
  says so in Postgres, once a second while it lasts; while another replica says so, this
  one's sweeps take runs ``BACKLOG_GRACE_SECONDS`` overdue rather than the full grace, so
  the fleet's idle slots serve a tenant beyond one replica's a second late, not five (ADR
  0063). A slow or starved replica is not overflowing (its claims find idle slots), so a
  loaded machine's late keys do not shorten anyone's grace;
* while a partition this replica owns is backlogged (a buffer's worth of its keys waits
  in the broker), each claim runs two statements at once: the polling claim, fair across
  tenants, of runs due at least ``BACKLOG_GRACE_SECONDS`` (so a tenant sharing the
  partition with another tenant's burst is not held behind the burst's keys), and the
  claim by key of up to half the limit. Fresh runs are left to their keys, and in that
  state the outbox publishes only each tenant's share of fresh runs (OutboxRelay, ADR
  0063), so the two take different rows and neither waits on the other; the claim loop's
  wait per batch is the slower of the two, not their sum (ADR 0025);
* while the broker is unreachable the polling claim does all the work (labelled
  ``sweeper``), with no grace: nothing is being published, so nothing is worth waiting for;
* after a claim of keys left runs a flow-control limit held back (``ClaimBatch.held``:
  their messages are consumed) or a sweep found runs of flow-control keys, each claim runs
  the fair polling claim of runs due at least ``BACKLOG_GRACE_SECONDS``, for as long as it
  keeps finding runs and for the sweeper's grace after that, then keys with what is left
  of the limit. A held run is claimed by the first claim after its key admits it and it
  is a second overdue (a freed slot here wakes the claim loop; else its poll, 0.25 s), not
  after the sweeper's grace and then one sweep a second (ADR 0040).

Two claims may be in flight at once while claims come back full, as in postgres mode
(ADR 0042), but only one of them takes keys: consumed keys are acknowledged or rewound
as a whole, so the claim that finds the keys' step busy does only what needs no keys (the
fair claim while backlogged, a due sweep) or nothing (ADR 0063).

Every batch says where its runs came from in ``ClaimBatch.sources``
(scheduler_claims_total{source="kafka"|"sweeper"}); a backlogged claim, which draws on
both, names both. ``name`` is the source's own label, "kafka", whatever a claim drew on.
"""

from __future__ import annotations

import asyncio
import logging

from cronwire.domain.backlog import BACKLOG_GRACE_SECONDS
from cronwire.domain.errors import StorageError
from cronwire.domain.model import ClaimBatch
from cronwire.ports import ClaimSource, Clock, KeyedClaimStore, RunHints

log = logging.getLogger(__name__)

KAFKA = "kafka"
SWEEPER = "sweeper"
# Behind for this long (every claim of keys limited by the slots, keys left over) before a
# replica says it overflows, and how often it says so again while it lasts.
OVERFLOW_AFTER_SECONDS = 1.0
# How long one report holds on the database's clock: a few sweeps of the other replicas,
# so a report a little late does not let the signal lapse while the overflow lasts.
OVERFLOW_REPORT_SECONDS = 3.0


class HybridClaimSource:
    name = KAFKA
    # Two claims in flight, as in postgres mode (ADR 0042), but one step of keys at a time:
    # consumed keys are taken, then acknowledged or rewound as a whole, so a second step
    # would acknowledge keys the first has not claimed. A claim that finds the keys' step
    # busy does only what needs no keys: the fair claim while backlogged, a due sweep.
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
        self._grace = grace_seconds
        self._sweep_seconds = sweep_seconds
        self._next_sweep = clock.monotonic() + sweep_seconds
        # Until then (monotonic), claims reclaim held runs fairly first (see above).
        self._reclaim_until = float("-inf")
        # Since when every claim of keys was limited by the slots (None: not behind), and
        # when this replica may report its overflow again (ADR 0063).
        self._behind_since: float | None = None
        self._next_report = float("-inf")
        # A peer's overflow as last read, and when to read it again.
        self._peer_overflow = False
        self._next_peer_read = float("-inf")
        # A claim is between taking keys and acknowledging (or rewinding) them.
        self._keys_busy = False

    async def claim(self, owner: str, limit: int, lease_seconds: float) -> ClaimBatch:
        if limit <= 0:
            return ClaimBatch()
        if not self._hints.healthy:
            degraded = await self._polling.claim(owner, limit, lease_seconds)
            return degraded.labelled(SWEEPER)
        if self._hints.backlogged:
            if self._keys_busy:
                beside = await self._keyed.claim_fair(owner, limit, lease_seconds,
                                                      BACKLOG_GRACE_SECONDS)
                return beside.labelled(SWEEPER)
            both = await self._claim_backlogged(owner, limit, lease_seconds)
            if both.runs or both.ended:
                return both
        now = self._clock.monotonic()
        if now < self._reclaim_until:
            return await self._claim_reclaiming(owner, limit, lease_seconds, now)
        if now >= self._next_sweep:
            self._next_sweep = now + self._sweep_seconds
            grace = self._grace
            if await self._peer_overflowing(owner, now):
                grace = min(grace, BACKLOG_GRACE_SECONDS)  # a peer's overflow: help now
            swept = await self._keyed.sweep(owner, limit, lease_seconds, grace)
            if len(swept.runs) >= limit:
                # Full: more are that late. The next claim sweeps again, so the overflow
                # drains at this replica's pace, not one claim's worth a second.
                self._next_sweep = now
            if swept.runs or swept.ended:  # a batch the claim only ended is counted too
                if any(run.flow_key is not None for run in swept.runs):
                    # Runs of flow-control keys no claim took in the grace: held back
                    # (a Retry-After that has just run out), their siblings likely too.
                    self._reclaim_until = now + self._grace
                return swept.labelled(SWEEPER)
        return await self._claim_keys(owner, limit, lease_seconds)

    async def _peer_overflowing(self, owner: str, now: float) -> bool:
        """Whether a peer reported an overflow: read at most once a sweep interval, since
        full sweeps follow each other at every claim while a backlog lasts. A failed read
        counts as none: the sweep goes ahead with the full grace (and fails by itself if
        the database is away)."""
        if now >= self._next_peer_read:
            self._next_peer_read = now + max(self._sweep_seconds, OVERFLOW_AFTER_SECONDS)
            try:
                self._peer_overflow = await self._keyed.peer_overflowing(owner)
            except StorageError:
                log.warning("reading the peers' overflow failed; sweeping with the full grace",
                            exc_info=True)
                self._peer_overflow = False
        return self._peer_overflow

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
        # Keys that found nothing claimable (finished, leased elsewhere, deleted) are
        # acknowledged with the rest: dropped, as a hint may be. Held ones are reclaimed.
        self._hints.acknowledge()
        self._note_held(batch)
        await self._note_pace(owner, limit, len(keys), len(batch.runs))
        return batch.labelled(KAFKA)

    async def _note_pace(self, owner: str, limit: int, taken: int, leased: int) -> None:
        """After a claim of keys: behind if it took all the slots let it and keys are left
        (and most of those it took were runnable: keys republished for runs claimed long
        ago are worked through in a few claims, not an overflow). Behind for
        OVERFLOW_AFTER_SECONDS, say so; a failed report is logged, the claim stands."""
        now = self._clock.monotonic()
        if taken < limit or not self._hints.buffered or 2 * leased < taken:
            self._behind_since = None
            return
        if self._behind_since is None:
            self._behind_since = now
        if now - self._behind_since < OVERFLOW_AFTER_SECONDS or now < self._next_report:
            return
        self._next_report = now + OVERFLOW_AFTER_SECONDS
        try:
            await self._keyed.report_overflow(owner, OVERFLOW_REPORT_SECONDS)
        except StorageError:
            log.warning("reporting this replica's overflow failed; its keys' overflow waits "
                        "for the sweepers' full grace", exc_info=True)

    def _note_held(self, batch: ClaimBatch) -> None:
        if batch.held:
            self._reclaim_until = self._clock.monotonic() + self._grace

    async def _claim_reclaiming(self, owner: str, limit: int, lease_seconds: float,
                                now: float) -> ClaimBatch:
        """Runs held back after their keys were consumed are due and waiting: the fair
        polling claim of runs due at least BACKLOG_GRACE_SECONDS (it also does the sweep's
        work meanwhile), then keys with what is left of the limit, so other tenants' fresh
        keys never queue behind the held runs."""
        reclaimed = await self._keyed.claim_fair(owner, limit, lease_seconds,
                                                 BACKLOG_GRACE_SECONDS)
        if reclaimed.runs or reclaimed.ended:
            self._reclaim_until = now + self._grace  # still draining
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
        return ClaimBatch(reclaimed.runs + keyed.runs, reclaimed.ended + keyed.ended,
                          ((SWEEPER, len(reclaimed.runs)), (KAFKA, len(keyed.runs))))

    async def _claim_backlogged(self, owner: str, limit: int, lease_seconds: float) -> ClaimBatch:
        """A partition this replica owns is behind (one tenant's burst), so the tenants whose
        keys queue behind it would wait for the whole burst: the fair polling claim (runs
        due at least BACKLOG_GRACE_SECONDS; fresher ones are left to their keys, here or on
        another replica) and the claim of up to half the limit by key, concurrently."""
        key_limit = max(1, limit // 2)
        keys = self._hints.take(key_limit)
        fair_limit = limit - len(keys)
        self._keys_busy = True
        try:
            fair, keyed = await asyncio.gather(
                self._keyed.claim_fair(owner, fair_limit, lease_seconds, BACKLOG_GRACE_SECONDS)
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
            self._note_held(keyed)
            await self._note_pace(owner, key_limit, len(keys), len(keyed.runs))
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
        fair_batch = ClaimBatch() if isinstance(fair, BaseException) else fair
        keyed_batch = ClaimBatch() if isinstance(keyed, BaseException) else keyed
        return ClaimBatch(fair_batch.runs + keyed_batch.runs,
                          fair_batch.ended + keyed_batch.ended,
                          ((SWEEPER, len(fair_batch.runs)), (KAFKA, len(keyed_batch.runs))))

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


async def _nothing() -> ClaimBatch:
    return ClaimBatch()
