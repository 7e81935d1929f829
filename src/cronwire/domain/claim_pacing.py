"""When a polling claim source claims again (pure rules, shared by the Postgres and the
in-memory claim sources).

When runs are overdue but the last claim took nothing, they are not the caller's to take
now: a flow-control key holds them back (for as long as it stays full) or another
replica's claim holds their rows. Claiming again 10 ms later, for as long as that lasts,
would be a tight loop on every replica; so the caller backs off, doubling per empty claim
in a row, but still wakes for the next run that falls due.
"""

from __future__ import annotations

# After an empty claim with runs overdue, the next claim waits this long, doubling per
# empty claim in a row (the claim loop caps the wait at its poll interval).
EMPTY_CLAIM_BACKOFF_SECONDS = 0.01


def seconds_until_next_claim(earliest: float | None, fresh: float | None,
                             empty_claims: int) -> float | None:
    """``earliest``: seconds until the earliest runnable run is due (negative: overdue;
    None: none runnable); ``fresh``: until the earliest one not due yet (None: none);
    ``empty_claims``: claims in a row that leased and ended nothing."""
    if earliest is None or earliest > 0 or empty_claims == 0:
        return earliest
    backoff = empty_claim_backoff(empty_claims)
    return backoff if fresh is None else min(backoff, fresh)


def empty_claim_backoff(empty_claims: int) -> float:
    """The wait after ``empty_claims`` (at least one) claims in a row that took nothing
    while runs were overdue: 10 ms, doubling (kafka mode's reclaim paces itself so too)."""
    return EMPTY_CLAIM_BACKOFF_SECONDS * 2.0 ** min(max(empty_claims, 1) - 1, 10)
