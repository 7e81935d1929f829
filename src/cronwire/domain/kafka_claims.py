"""Kafka mode's claim decisions (pure): which step the hybrid claim source takes next.

The hybrid claim source (``service/executor/hybrid_claims.py``) claims runs by the keys
the broker delivered, with a SKIP LOCKED sweeper beside them (ADR 0030). Which of its
steps a claim takes depends on the broker's health, on the last claims' results and on
the time; this module decides, the claim source executes. Nothing here does I/O: each
method takes the state, the clock reading and what the claim source observed, and
returns the step and the new state.

The steps, in the order they are considered:

* :class:`Degraded` — the broker is unreachable: the polling claim does all the work,
  with no grace (nothing is being published, so nothing is worth waiting for);
* :class:`BesideKeys` — a partition is backlogged and the other claim in flight is
  taking keys: only the fair polling claim, which needs no keys (ADR 0063);
* :class:`BacklogBoth` — a partition is backlogged (one tenant's burst): the fair
  polling claim of runs due at least ``BACKLOG_GRACE_SECONDS`` and the claim of up to
  half the limit by key, at once (ADR 0025); if both find nothing, the state decides;
* :class:`Reclaim` — a claim of keys left runs a flow-control limit held back, or a
  sweep found runs of flow-control keys: the fair polling claim first, for as long as it
  finds runs and for the grace after that, then keys with what is left (ADR 0040);
* :class:`ReadPeer` then :class:`Sweep` — every ``sweep_seconds``, the sweep of runs due
  longer than the grace that no key delivered; while a peer reports an overflow, runs
  ``BACKLOG_GRACE_SECONDS`` overdue (the peer is read at most once an interval). A full
  sweep sweeps again at the next claim; an empty one is followed by keys (ADR 0063);
* :class:`ClaimKeys` — otherwise, the claim by the buffered keys.

After each claim of keys, :meth:`KafkaClaimPolicy.keys_claimed` says whether this
replica reports its own overflow (:class:`ReportOverflow`): when every claim of keys for
``OVERFLOW_AFTER_SECONDS`` took as many keys as it was let and left more buffered, and
the claims that leased most of their keys came less than ``STALE_KEYS_SECONDS`` apart;
again at most once ``OVERFLOW_AFTER_SECONDS`` while it lasts (ADR 0063).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from cronwire.domain.backlog import BACKLOG_GRACE_SECONDS
from cronwire.domain.claim_pacing import empty_claim_backoff

# Behind for this long (every claim of keys limited by the slots, keys left over) before a
# replica says it overflows, and how often it says so again while it lasts.
OVERFLOW_AFTER_SECONDS = 1.0
# How long one report holds on the database's clock: a few sweeps of the other replicas,
# so a report a little late does not let the signal lapse while the overflow lasts.
OVERFLOW_REPORT_SECONDS = 3.0
# While behind, claims whose keys mostly found their runs gone (the helpers' sweeps took
# the oldest runs, the ones the owner's next keys name) keep it behind for this long after
# the last claim that leased most of its keys; then it is only working through stale keys.
STALE_KEYS_SECONDS = 1.0

# The longest wait between reclaims that find nothing. A slot of the key freed on another
# replica sends no key, and a full key drains one round per slot: with the polling claim's
# cap (the loop's 0.25 s poll) a 60-run key of 2 slots and a 50 ms receiver took 3.3-3.9 s
# to drain instead of 1.9 s.
RECLAIM_WAIT_CAP_SECONDS = 0.04

_NEVER = float("-inf")


@dataclass(frozen=True)
class ClaimState:
    """What the decisions remember between claims; times are the claim source's
    monotonic clock."""

    next_sweep: float
    # Until then, claims reclaim held runs fairly first; how many reclaims in a row found
    # nothing (their pace).
    reclaim_until: float = _NEVER
    empty_reclaims: int = 0
    # Since when every claim of keys was limited by the slots (None: not behind), and
    # when this replica may report its overflow again.
    behind_since: float | None = None
    next_report: float = _NEVER
    # When a claim last took all its slots allowed, left keys and leased most of them.
    last_leasing_claim: float = _NEVER
    # A peer's overflow as last read, and when to read it again.
    peer_overflow: bool = False
    next_peer_read: float = _NEVER


@dataclass(frozen=True)
class Idle:
    """The claim was let take nothing."""


@dataclass(frozen=True)
class Degraded:
    """The polling claim, labelled ``sweeper``, with no grace."""


@dataclass(frozen=True)
class BesideKeys:
    """The fair polling claim of runs due at least ``grace``, labelled ``sweeper``."""

    grace: float = BACKLOG_GRACE_SECONDS


@dataclass(frozen=True)
class BacklogBoth:
    """Take up to ``key_limit`` keys; claim them and, with the rest of the limit, the
    fair polling claim of runs due at least ``grace``, concurrently."""

    key_limit: int
    grace: float = BACKLOG_GRACE_SECONDS


@dataclass(frozen=True)
class Reclaim:
    """The fair polling claim of runs due at least ``grace``, then keys with what is
    left of the limit; report back with :meth:`KafkaClaimPolicy.reclaimed`."""

    grace: float = BACKLOG_GRACE_SECONDS


@dataclass(frozen=True)
class ReadPeer:
    """Read whether a peer reports an overflow, then hand the answer to
    :meth:`KafkaClaimPolicy.peer_read` for the sweep."""


@dataclass(frozen=True)
class Sweep:
    """The sweep of runs due longer than ``grace``; report back with
    :meth:`KafkaClaimPolicy.swept`; if it found nothing, claim keys."""

    grace: float


@dataclass(frozen=True)
class ClaimKeys:
    """The claim by the buffered keys; report back with
    :meth:`KafkaClaimPolicy.keys_claimed`."""


@dataclass(frozen=True)
class ReportOverflow:
    """Say in the database that this replica's keys outrun its slots, for
    ``hold_seconds`` on the database's clock."""

    hold_seconds: float = OVERFLOW_REPORT_SECONDS


OpeningStep = Idle | Degraded | BesideKeys | BacklogBoth
StateStep = Reclaim | ReadPeer | Sweep | ClaimKeys


@dataclass(frozen=True)
class KafkaClaimPolicy:
    """``grace_seconds``: how late a run is before the sweep takes it; ``sweep_seconds``:
    how often the sweep runs."""

    grace_seconds: float
    sweep_seconds: float = 1.0

    def start(self, now: float) -> ClaimState:
        """The first sweep an interval from now."""
        return ClaimState(next_sweep=now + self.sweep_seconds)

    def opening(self, *, limit: int, healthy: bool, backlogged: bool,
                keys_busy: bool) -> OpeningStep | None:
        """The step the observations decide alone, or None: :meth:`next_step` decides
        (also after a :class:`BacklogBoth` that found nothing)."""
        if limit <= 0:
            return Idle()
        if not healthy:
            return Degraded()
        if backlogged:
            # Consumed keys are acknowledged or rewound as a whole, so only one claim in
            # flight takes keys; the other does what needs none.
            return BesideKeys() if keys_busy else BacklogBoth(key_limit=max(1, limit // 2))
        return None

    def next_step(self, state: ClaimState, now: float) -> tuple[ClaimState, StateStep]:
        """Reclaiming held runs, a due sweep (after reading the peers when that is due),
        or keys."""
        if now < state.reclaim_until:
            return state, Reclaim()
        if now < state.next_sweep:
            return state, ClaimKeys()
        state = replace(state, next_sweep=now + self.sweep_seconds)
        if now >= state.next_peer_read:
            # At most once an interval: full sweeps follow each other at every claim while
            # a backlog lasts.
            return replace(state, next_peer_read=now + max(self.sweep_seconds,
                                                           OVERFLOW_AFTER_SECONDS)), ReadPeer()
        return state, self._sweep(state)

    def peer_read(self, state: ClaimState, overflowing: bool) -> tuple[ClaimState, Sweep]:
        """``overflowing``: a peer's report is ahead (a failed read counts as none)."""
        state = replace(state, peer_overflow=overflowing)
        return state, self._sweep(state)

    def _sweep(self, state: ClaimState) -> Sweep:
        if state.peer_overflow:
            return Sweep(min(self.grace_seconds, BACKLOG_GRACE_SECONDS))  # help now
        return Sweep(self.grace_seconds)

    def swept(self, state: ClaimState, now: float, *, limit: int, found: int,
              flow_keys: bool) -> ClaimState:
        """After a sweep (``now``: when it was chosen) that leased ``found`` runs,
        ``flow_keys`` if any of them has a flow-control key."""
        if found >= limit:
            # Full: more are that late. The next claim sweeps again, so the overflow
            # drains at this replica's pace, not one claim's worth a second.
            state = replace(state, next_sweep=now)
        if flow_keys:
            # Runs of flow-control keys no claim took in the grace: held back (a
            # Retry-After that has just run out), their siblings likely too.
            state = replace(state, reclaim_until=now + self.grace_seconds, empty_reclaims=0)
        return state

    def reclaimed(self, state: ClaimState, now: float, *, found: bool) -> ClaimState:
        """After the fair claim of a :class:`Reclaim` (``now``: when it was chosen):
        ``found``, it leased or ended runs, so held runs are still draining."""
        if found:
            return replace(state, reclaim_until=now + self.grace_seconds, empty_reclaims=0)
        return replace(state, empty_reclaims=state.empty_reclaims + 1)

    def keys_claimed(self, state: ClaimState, now: float, *, limit: int, taken: int,
                     leased: int, held: int, keys_left: bool
                     ) -> tuple[ClaimState, ReportOverflow | None]:
        """After a claim of ``taken`` keys (of at most ``limit``) that leased ``leased``
        runs and left ``held`` runnable behind a flow-control limit; ``keys_left``: more
        keys are buffered. Behind when it took all the slots let it, keys are left, and
        most of those it took were runnable (keys republished for runs claimed long ago
        are worked through in a few claims, not an overflow). Once behind, a claim whose
        keys mostly found nothing keeps it so for ``STALE_KEYS_SECONDS`` after the last
        that leased most: the helpers' sweeps take the oldest runs, which are the ones its
        next keys name, and the report must not stop because they help."""
        if held:
            state = replace(state, reclaim_until=now + self.grace_seconds, empty_reclaims=0)
        if taken < limit or not keys_left:
            return replace(state, behind_since=None), None
        if 2 * leased >= taken:
            state = replace(state, last_leasing_claim=now)
        elif state.behind_since is None or now - state.last_leasing_claim > STALE_KEYS_SECONDS:
            return replace(state, behind_since=None), None
        since = now if state.behind_since is None else state.behind_since
        state = replace(state, behind_since=since)
        if now - since < OVERFLOW_AFTER_SECONDS or now < state.next_report:
            return state, None
        return replace(state, next_report=now + OVERFLOW_AFTER_SECONDS), ReportOverflow()

    def seconds_until_claim(self, state: ClaimState, now: float) -> float:
        """How long a claim loop that found nothing may wait before it claims again (a key
        or a freed slot wakes it sooner): until the next sweep; while reclaiming, 10 ms
        doubling per reclaim in a row that found nothing, as the polling claim backs off
        (domain/claim_pacing.py), up to ``RECLAIM_WAIT_CAP_SECONDS``. The reclaim's fair
        claim polls for what sends no key (a slot of the key freed on another replica, a
        hold running out), so its retries stay quick; but the sweep it stands in for stays
        due meanwhile, and waiting for that sweep had the loop claim every 10 ms for the
        whole grace (the simulation's kafka seeds: 11,613 of 13,650 claims, all but 444
        empty)."""
        if now < state.reclaim_until:
            if not state.empty_reclaims:
                return 0.0
            return min(RECLAIM_WAIT_CAP_SECONDS, empty_claim_backoff(state.empty_reclaims))
        return max(0.0, state.next_sweep - now)
