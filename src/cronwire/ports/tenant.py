"""The tenant API's ports: tokens, schedules, run history. Re-exported by
:mod:`cronwire.ports`, where services import them from.

Every method takes the tenant id and confines itself to that tenant's rows: another
tenant's object is indistinguishable from a missing one (NotFound), never a 403.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import Protocol
from uuid import UUID

from cronwire.domain.access import Change, Grant, Scope, TokenRecord
from cronwire.domain.apply_plan import ApplyPlan
from cronwire.domain.audit import AuditQuery, AuditRecord, Revision
from cronwire.domain.backfill import BackfillPlan, BackfillResult
from cronwire.domain.flow_control import FlowKeyState
from cronwire.domain.history import RunDetail, RunQuery, RunView
from cronwire.domain.replay import ReplayQuery
from cronwire.domain.schedules import ScheduleRecord, ScheduleSpec, TenantLimits

# (the schedule as it is, the database's now, the oldest instant a run can be written at
# or None) -> what to backfill; pure, may raise a domain error.
BackfillPlanner = Callable[[ScheduleSpec, datetime, datetime | None], BackfillPlan]
# (the schedules an apply compares with, how many live schedules the tenant has) -> the
# plan, computed off the event loop; may raise a domain error (nothing is written then).
ApplyDecider = Callable[[Sequence[ScheduleRecord], int], Awaitable[ApplyPlan]]
# Called with the plan before anything is written (the address policy of new target
# URLs); raises to refuse it.
ApplyAdmission = Callable[[ApplyPlan], Awaitable[None]]


class TokenVerifier(Protocol):
    async def grant_for_token(self, token: str) -> Grant | None:
        """What ``token`` grants (its tenant, id, name, scope, whether it expired on the
        database's clock), compared in constant time; None for an unknown or revoked one.
        Notes the use for ``last_used_at`` without waiting for the write."""
        ...


class TokenStore(TokenVerifier, Protocol):
    """A tenant's own tokens (``/v1/tokens``). Issue and revoke write their audit row in
    their transaction. StorageError when the database fails."""

    async def issue(self, tenant_id: UUID, *, name: str, scope: Scope,
                    expires_at: datetime | None, change: Change) -> tuple[TokenRecord, str]:
        """A new token (the record and the token itself, shown once); LimitExceeded
        ("max_tokens") past the tenant's live-token cap."""
        ...

    async def list(self, tenant_id: UUID) -> list[TokenRecord]:
        """The tenant's unrevoked tokens, oldest first (expired ones included)."""
        ...

    async def revoke(self, tenant_id: UUID, token_id: UUID, change: Change) -> TokenRecord:
        """Revoke at once (idempotent: audited once); NotFound for another tenant's."""
        ...

    async def db_now(self) -> datetime: ...


class AuditReader(Protocol):
    async def list(self, tenant_id: UUID, query: AuditQuery) -> Sequence[AuditRecord]:
        """The tenant's audit rows matching ``query``, newest first, at most
        ``query.limit``. StorageError when the database fails."""
        ...


class ScheduleStore(Protocol):
    """Schedules as tenants edit them. Every fire-time computation uses the database
    clock read inside the writing transaction. Raises NotFound for a missing, deleted or
    foreign schedule and StorageError when the database fails. Every change writes its
    audit row (``change`` says who made it) in its own transaction; ``if_match`` (a
    version) refuses a change made against a stale read with VersionMismatch."""

    async def limits_and_now(
        self, tenant_id: UUID, defaults: TenantLimits
    ) -> tuple[TenantLimits, datetime]:
        """The tenant's effective limits (its own columns over ``defaults``) and ``now()``."""
        ...

    async def create(
        self, tenant_id: UUID, spec: ScheduleSpec, *, paused: bool, signing_secret: str,
        max_schedules: int, change: Change = ...,
    ) -> ScheduleRecord:
        """Insert a validated schedule (version 1) with its first ``next_fire_at``, its
        first revision and its audit row; LimitExceeded ("max_schedules") when the tenant
        already has ``max_schedules`` live ones."""
        ...

    async def db_now(self) -> datetime:
        """Postgres ``now()`` (previews count from it)."""
        ...

    async def get(self, tenant_id: UUID, schedule_id: UUID) -> ScheduleRecord: ...

    async def list(
        self, tenant_id: UUID, *, after: UUID | None, limit: int
    ) -> Sequence[ScheduleRecord]:
        """Live schedules ordered by id, strictly after ``after`` (keyset)."""
        ...

    async def update(
        self, tenant_id: UUID, schedule_id: UUID, revise: Callable[[ScheduleSpec], ScheduleSpec],
        *, change: Change = ..., if_match: int | None = None, action: str = ...,
    ) -> ScheduleRecord:
        """Lock the row, refuse a stale ``if_match`` (VersionMismatch), apply ``revise``
        (pure; may raise a domain error, which rolls back), recompute ``next_fire_at`` if
        the timing changed, write; if anything differs, the next version, its revision and
        the audit row (``action``) in the same transaction, else none of them."""
        ...

    async def delete(self, tenant_id: UUID, schedule_id: UUID, *, change: Change = ...,
                     if_match: int | None = None) -> int:
        """Soft-delete; cancels the schedule's pending/retrying runs. Running ones finish
        the request in flight (recorded) and then end cancelled: no attempt starts after
        the delete. Returns how many runs were cancelled or so marked. History stays
        readable."""
        ...

    async def set_paused(
        self, tenant_id: UUID, schedule_id: UUID, paused: bool, note: str | None = None, *,
        change: Change = ..., if_match: int | None = None,
        resumed_at: datetime | None = None,
    ) -> ScheduleRecord:
        """Pause (``note`` kept as ``paused_reason``) or resume (clears the reason and the
        failure count). Resuming keeps ``next_fire_at`` so the planner's misfire policy
        decides what happens to the occurrences missed while paused, judged at
        ``resumed_at`` (the instant the resume counted them at; None: the store's now).
        StateConflict for a completed schedule."""
        ...

    async def trigger(self, tenant_id: UUID, schedule_id: UUID, *,
                      max_pending_runs: int, change: Change = ...) -> RunView:
        """A manual run due now, at an instant no cron occurrence can take. LimitExceeded
        (``max_pending_runs``) if the tenant's runs not yet ended would pass its limit (its
        own, else ``max_pending_runs``); checked so that concurrent requests cannot
        overshoot it together."""
        ...

    async def rotate_secret(
        self, tenant_id: UUID, schedule_id: UUID, new_secret: str, overlap_seconds: int, *,
        change: Change = ...,
    ) -> ScheduleRecord:
        """Install ``new_secret``; the old one keeps signing for ``overlap_seconds``."""
        ...

    async def revisions(self, tenant_id: UUID, schedule_id: UUID,
                        limit: int) -> Sequence[Revision]:
        """The live schedule's versions, newest first, at most ``limit``."""
        ...

    async def revision_spec(self, tenant_id: UUID, schedule_id: UUID,
                            version: int) -> ScheduleSpec:
        """The definition the live schedule had at ``version`` (header values in clear);
        NotFound for a version it never had or one past retention."""
    async def get_by_key(self, tenant_id: UUID, key: str) -> ScheduleRecord:
        """The tenant's live schedule with this ``key``; NotFound if there is none."""
        ...

    async def apply(
        self, tenant_id: UUID, keys: Sequence[str], decide: ApplyDecider,
        admit: ApplyAdmission, *, prune_managed_by: str | None, dry_run: bool,
        change: Change = ...,
    ) -> tuple[ApplyPlan, dict[str, ScheduleRecord]]:
        """One transaction, serialised with the tenant's other applies and creates: read
        the live schedules with one of ``keys`` (and, with ``prune_managed_by``, those it
        manages), ``decide``, ``admit``, then (unless ``dry_run``) write exactly the plan
        through the same paths as create, update, pause and delete: nothing for an
        unchanged schedule. Returns the plan and the schedules with a listed key as they
        are afterwards. A domain error from ``decide`` or ``admit``, or StateConflict for
        a key another schedule took meanwhile, rolls everything back."""
        ...


class RunCommands(Protocol):
    """The tenant's writes that make runs outside the planner: backfill and replay. Same
    tenant confinement and errors as :class:`ScheduleStore`; each write that makes runs
    writes its audit rows (``change``) in its transaction."""

    async def backfill(
        self, tenant_id: UUID, schedule_id: UUID, plan: BackfillPlanner, *, dry_run: bool,
        max_pending_runs: int, change: Change = ...,
    ) -> BackfillResult:
        """Call ``plan`` (pure, and CPU-heavy: it may run away from the event loop, and
        never while a connection or a transaction is held); then, in one transaction with
        the schedule locked against a delete, and only if the schedule is still the one
        planned from (else plan again), insert one ``pending`` run (``trigger: "backfill"``, due now) per occurrence
        that has none (``ON CONFLICT DO NOTHING``), or, for a dry run, only count the
        occurrences that already have one. NotFound for a missing or deleted schedule.
        LimitExceeded (``max_pending_runs``) if the new runs would take the tenant's runs
        not yet ended past its limit (its own, else ``max_pending_runs``), race-safe
        between concurrent requests; a dry run is never refused, and says whether the
        real one would be (``BackfillResult.over_limit``)."""
        ...

    async def replay(self, tenant_id: UUID, run_id: UUID, *, max_pending_runs: int,
                     change: Change = ...) -> RunView:
        """A new run repeating the failed run ``run_id`` (``trigger: "replay"``), due now.
        NotFound if not this tenant's; StateConflict if it did not fail, was replayed
        already, or its schedule is deleted; LimitExceeded as :meth:`backfill`."""
        ...

    async def replay_failed(self, tenant_id: UUID, query: ReplayQuery, *,
                            max_pending_runs: int, change: Change = ...) -> list[UUID]:
        """Replay the tenant's failed runs not yet replayed (of live schedules), oldest
        ``scheduled_for`` first, at most ``query.limit``; returns the new runs' ids.
        LimitExceeded as :meth:`backfill` if they do not all fit (none is written)."""
        ...


class FlowControlView(Protocol):
    """Flow control as it stands (ADR 0040), read only."""

    async def keys(self, tenant_id: UUID, limit: int,
                   key: str | None = None) -> Sequence[FlowKeyState]:
        """The tenant's keys in key order, at most ``limit`` (only ``key`` when given):
        limits, runs in flight, runs due and waiting, a Retry-After hold. Raises
        StorageError."""
        ...


class RunHistory(Protocol):
    """The tenant-facing run history (reads only)."""

    async def list(self, tenant_id: UUID, query: RunQuery) -> Sequence[RunView]: ...

    async def get(self, tenant_id: UUID, run_id: UUID) -> RunDetail:
        """The run and its attempts (oldest first); NotFound if not this tenant's."""
        ...
