"""Kafka mode's ports: run keys, never payloads; Postgres stays the source of
truth. Re-exported by :mod:`cronwire.ports`, where services import them from."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import Protocol
from uuid import UUID

from cronwire.domain.model import ClaimBatch

RunKey = tuple[UUID, datetime]  # (run_id, scheduled_for): scheduled_for prunes to a partition


class RunHints(Protocol):
    """Run keys a broker delivered (Kafka consumer). A hint is never authority: the claim
    re-checks everything in Postgres, and a key that is not claimable is dropped."""

    @property
    def healthy(self) -> bool:
        """False while the broker is unreachable (the hybrid source degrades to its sweeper)."""
        ...

    @property
    def backlogged(self) -> bool:
        """True while a partition's keys arrive faster than this replica takes them (a
        buffer's worth of keys waits in the broker behind what it fetched, asked of the
        broker while the partition is paused): keys behind the backlog, other tenants'
        among them, wait their turn in the partition's order."""
        ...

    @property
    def buffered(self) -> int:
        """Delivered keys not taken yet."""
        ...

    def take(self, limit: int) -> list[RunKey]:
        """Up to ``limit`` delivered keys not taken yet, oldest first; never blocks."""
        ...

    async def wait(self, seconds: float) -> None:
        """Until keys are waiting to be taken, or ``seconds``."""
        ...

    def acknowledge(self) -> None:
        """Every key taken so far is settled (claimed, or not claimable): their offsets may
        be committed. Called only after the claim transaction committed."""
        ...

    def rewind(self) -> None:
        """The claim of the keys taken since the last acknowledge failed: forget them and
        deliver them again from the last committed offsets."""
        ...


class KeyedClaimStore(Protocol):
    """Postgres claims of kafka mode; leases are taken exactly as ClaimSource.claim takes
    them (same lease-taking SQL). Raise StorageError."""

    async def claim_keys(
        self, owner: str, keys: Sequence[RunKey], lease_seconds: float
    ) -> ClaimBatch:
        """Lease those of ``keys`` that are runnable now (or hold an expired lease). The
        batch's ``held`` counts the keys whose runs it left runnable and due: a
        flow-control limit (ADR 0040) refused them, so they need another claim."""
        ...

    async def claim_fair(
        self, owner: str, limit: int, lease_seconds: float, grace_seconds: float
    ) -> ClaimBatch:
        """The polling claim (fair across tenants), of runs due at least ``grace_seconds``
        and expired leases."""
        ...

    async def sweep(
        self, owner: str, limit: int, lease_seconds: float, grace_seconds: float
    ) -> ClaimBatch:
        """SKIP LOCKED: up to ``limit`` runs due longer than ``grace_seconds`` and expired
        leases, oldest first."""
        ...

    async def report_overflow(self, owner: str, seconds: float) -> None:
        """``owner``'s keys arrive faster than its delivery slots take them: say so, for
        the next ``seconds`` on the database's clock (ADR 0063)."""
        ...

    async def peer_overflowing(self, owner: str) -> bool:
        """Whether a replica other than ``owner`` said it overflows, and the time it gave
        has not run out."""
        ...


class RunPublisher(Protocol):
    """Kafka mode's hint channel out: run keys to the topic, keyed by tenant_id."""

    @property
    def healthy(self) -> bool: ...

    async def publish(self, runs: Sequence[tuple[UUID, datetime, UUID]]) -> list[RunKey]:
        """Send ``(run_id, scheduled_for, tenant_id)`` of many runs in one batch; returns
        the keys the broker acknowledged (acks=all). Raises BrokerError when the broker
        cannot be reached; nothing is then known to be published."""
        ...


class OutboxStore(Protocol):
    """job_run.published_at as an outbox (Postgres). Raises StorageError."""

    async def publish_due(
        self,
        limit: int,
        send: Callable[[Sequence[tuple[UUID, datetime, UUID]]], Awaitable[Sequence[RunKey]]],
        *,
        max_age_seconds: float | None = None,
        per_tenant: int | None = None,
    ) -> int:
        """Mark up to ``limit`` due, unpublished, runnable runs (due at most
        ``max_age_seconds`` ago, and at most ``per_tenant`` of each tenant's, if given)
        published (SKIP LOCKED, one committed statement), then ``await send(runs)`` and
        unmark the keys it did not return. If ``send`` raises, every key is unmarked and
        the exception propagates.
        A crash between the mark and the send leaves the runs to the sweeper. Returns how
        many keys were sent and stay marked."""
        ...

    async def seconds_until_unpublished_due(self) -> float | None:
        """Seconds until the earliest unpublished runnable run is due, None if none."""
        ...
