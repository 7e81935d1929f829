"""The core records of the domain: schedules, runs and attempts (pure data, no I/O)."""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from enum import StrEnum

from cronwire.domain.calendars import NO_EXCLUSIONS, Exclusions
from cronwire.domain.client_tls import ClientTls

# Fixed forever: run ids are uuid5(RUN_NAMESPACE, "<schedule_id>/<scheduled_for µs>"), so
# the same occurrence always gets the same id and idempotency key on every replica.
RUN_NAMESPACE = uuid.UUID("6f1d8d4e-3c0b-5a57-9a43-0c7a1f3e9b21")
MAX_ATTEMPTS = 8
_NAMESPACE_BYTES = RUN_NAMESPACE.bytes
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)
# uuid5's version (5) and RFC 4122 variant bits, applied to the digest's first 128 bits.
_UUID5_CLEAR = ~((0xF000 << 64) | (0xC000 << 48))
_UUID5_SET = (0x5000 << 64) | (0x8000 << 48)


class ScheduleStatus(StrEnum):
    ACTIVE = "active"
    PAUSED = "paused"
    COMPLETED = "completed"  # a one-time schedule ran, or max_runs occurrences were planned
    DELETED = "deleted"


class MisfirePolicy(StrEnum):
    FIRE_ALL = "fire_all"
    FIRE_ONCE = "fire_once"
    SKIP = "skip"


class RunStatus(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    RETRYING = "retrying"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    SKIPPED = "skipped"
    CANCELLED = "cancelled"

    @property
    def terminal(self) -> bool:
        return self in TERMINAL_STATUSES


TERMINAL_STATUSES = frozenset(
    {RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.SKIPPED, RunStatus.CANCELLED}
)


class Trigger(StrEnum):
    SCHEDULE = "schedule"
    MANUAL = "manual"
    BACKFILL = "backfill"
    REPLAY = "replay"


class OverlapPolicy(StrEnum):
    """What an occurrence does while the schedule's previous run is running or retrying
    (ADR 0033); the rules are :mod:`cronwire.domain.overlap`'s."""

    ALLOW = "allow"
    SKIP = "skip"
    BUFFER_ONE = "buffer_one"
    BUFFER_ALL = "buffer_all"
    CANCEL_OTHER = "cancel_other"


class SkipReason(StrEnum):
    """Why a run is ``skipped`` (job_run.skip_reason)."""

    MISFIRE = "misfire"  # missed while nothing ran; the misfire policy dropped it
    OVERLAP = "overlap"  # the overlap policy dropped it
    CALENDAR = "calendar"  # a calendar the schedule excludes lists its date


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    max_attempts: int = 3
    initial_backoff_seconds: float = 10.0
    max_backoff_seconds: float = 3600.0


# A target's HTTP methods (here, not in schedule_rules: the CLI lists them cron-free).
METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")


@dataclass(frozen=True, slots=True)
class Target:
    url: str
    method: str = "POST"
    headers: Mapping[str, str] = field(default_factory=dict)
    body: str | None = None
    tls: ClientTls | None = None  # a client certificate for the receiver (mTLS)


def epoch_micros(instant: datetime) -> int:
    # Aware datetimes subtract in UTC; integer division keeps every microsecond exact.
    return (instant - _EPOCH) // _MICROSECOND


def run_id_int(schedule_id: uuid.UUID, scheduled_for: datetime) -> int:
    """:func:`run_id_for` as its 128-bit integer: the planner writes ~100k ids per burst,
    and a ``uuid.UUID`` object (what ``uuid.uuid5`` builds) costs more than the digest."""
    name = f"{schedule_id}/{epoch_micros(scheduled_for)}".encode()
    digest = int.from_bytes(hashlib.sha1(_NAMESPACE_BYTES + name).digest()[:16])
    return (digest & _UUID5_CLEAR) | _UUID5_SET


def run_id_hexes(occurrences: Iterable[tuple[uuid.UUID, datetime]]) -> list[str]:
    """``run_id_for(schedule_id, at).hex`` of many occurrences, in order: the planner's
    batch form. The epoch text is computed once per distinct instant (a burst has one)."""
    instants: dict[datetime, str] = {}
    hexes: list[str] = []
    for schedule_id, at in occurrences:
        micros = instants.get(at)
        if micros is None:
            micros = instants[at] = str(epoch_micros(at))
        digest = int.from_bytes(
            hashlib.sha1(_NAMESPACE_BYTES + f"{schedule_id}/{micros}".encode()).digest()[:16])
        hexes.append(f"{(digest & _UUID5_CLEAR) | _UUID5_SET:032x}")
    return hexes


def run_id_for(schedule_id: uuid.UUID, scheduled_for: datetime) -> uuid.UUID:
    """Deterministic run id: the same (schedule, occurrence) always maps to the same id
    (``uuid5(RUN_NAMESPACE, "<schedule_id>/<epoch µs>")``)."""
    return uuid.UUID(int=run_id_int(schedule_id, scheduled_for))


IDEMPOTENCY_KEY_PREFIX = "msg_"


def idempotency_key_for(run_id: uuid.UUID) -> str:
    """The ``webhook-id`` receivers dedupe on; stable across attempts and replicas."""
    return IDEMPOTENCY_KEY_PREFIX + run_id.hex


@dataclass(frozen=True, slots=True)
class DueSchedule:
    """What the planner reads of one claimed, due schedule."""

    id: uuid.UUID
    tenant_id: uuid.UUID
    cron: str | None  # None: a one-time schedule, firing once at ``at``
    timezone: str
    misfire_policy: MisfirePolicy
    catchup_window_seconds: int
    next_fire_at: datetime
    last_fire_at: datetime | None
    starts_at: datetime | None
    ends_at: datetime | None
    at: datetime | None = None
    overlap_policy: OverlapPolicy = OverlapPolicy.ALLOW
    jitter_seconds: int = 0
    max_runs: int | None = None
    runs_planned: int = 0  # scheduled occurrences written so far (counted for max_runs)
    exclusions: Exclusions = NO_EXCLUSIONS  # its calendars' dates and policy (calendars.py)
    # When it was last resumed: the instant its missed occurrences are judged at until the
    # planner has planned past it (planning.judged_at).
    resumed_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class PlannedRun:
    """One occurrence to materialise; id and idempotency key derive from it."""

    schedule_id: uuid.UUID
    tenant_id: uuid.UUID
    scheduled_for: datetime
    status: RunStatus = RunStatus.PENDING  # SKIPPED for misfires the policy drops
    trigger: Trigger = Trigger.SCHEDULE
    # The overlap policy the run is gated by; None for 'allow' (never gated).
    overlap_policy: OverlapPolicy | None = None
    jitter_ms: int = 0  # fire_after = scheduled_for + this (domain/jitter.py)
    skip_reason: SkipReason | None = None  # on a SKIPPED run: why (None: MISFIRE)

    @property
    def id(self) -> uuid.UUID:
        return run_id_for(self.schedule_id, self.scheduled_for)

    @property
    def idempotency_key(self) -> str:
        return idempotency_key_for(self.id)


@dataclass(frozen=True, slots=True)
class ScheduleAdvance:
    """The planner's move of one schedule's cursor (None: no further occurrence)."""

    schedule_id: uuid.UUID
    next_fire_at: datetime | None
    last_fire_at: datetime | None
    planned: int = 0  # scheduled occurrences written by this pass (runs_planned grows by it)
    completed: bool = False  # no occurrence is left: the schedule's status becomes completed


@dataclass(frozen=True, slots=True)
class PlanDecision:
    runs: list[PlannedRun]
    advances: list[ScheduleAdvance]
    # Claimed schedules the decision left alone on purpose (the early pass's frequent
    # ones): not work still due, so they do not make a batch count as full.
    passed_over: int = 0


# (run id, scheduled_for, lease generation): one held lease, as every lease write names it.
LeaseKey = tuple[uuid.UUID, datetime, int]


# The value objects made once or more per delivery (ClaimedRun, RunResolution, AttemptRecord,
# DeliveryRequest, DeliveryResult) are not frozen=True: a frozen dataclass's __init__ sets every
# field through object.__setattr__, about 5x a plain slots __init__ (3.5 against 0.6 µs for 12
# fields here), ~5% of an executor's CPU in the 100k burst. Nothing assigns to them after
# construction (dataclasses.replace makes a new one), and unsafe_hash keeps them hashable by value
# as frozen ones were.
@dataclass(slots=True, unsafe_hash=True)
class ClaimedRun:
    """A run whose lease this replica holds, with everything needed to deliver it."""

    id: uuid.UUID
    tenant_id: uuid.UUID
    schedule_id: uuid.UUID
    scheduled_for: datetime
    idempotency_key: str
    trigger: Trigger
    attempt: int  # the attempt about to be made, 1..MAX_ATTEMPTS
    target: Target
    retry: RetryPolicy
    signing_secrets: tuple[str, ...]
    lease_expires_at: datetime
    # The claim's lease generation: every write on this lease names it (lease identity).
    lease_generation: int = 0
    # A replay's original occurrence, delivered in x-cronwire-scheduled-for and the default
    # body in place of the replay's own scheduled_for (None: the run is its own occurrence).
    occurrence: datetime | None = None
    # The flow-control key the run counts under (ADR 0040); None: no flow control.
    flow_key: str | None = None
    # overlap_policy cancel_other: the request is aborted once a newer occurrence starts.
    cancel_other: bool = False


@dataclass(frozen=True, slots=True)
class ClaimBatch:
    """What one claim returns, always (an empty claim too): ``runs``, leased to the
    caller; ``ended``, the terminal statuses of runs the claim itself ended instead of
    leasing them (an expired lease whose final attempt had started: failed; one whose
    schedule was deleted: cancelled), so the caller counts them in scheduler_runs_total
    like any other finished run; and ``sources``, how many runs each source gave as
    ``(label, count)`` for a claim that says so (kafka mode's, which draws on the broker's
    keys and on the sweeper); when empty, the claim source's ``name`` labels them all;
    ``held``, for a claim of keys, how many of the keys' runs it left runnable and due (a
    flow-control limit held them back): they need another claim soon."""

    runs: tuple[ClaimedRun, ...] = ()
    ended: tuple[RunStatus, ...] = ()
    sources: tuple[tuple[str, int], ...] = ()
    held: int = 0

    def labelled(self, source: str) -> ClaimBatch:
        """This batch with every run it leased counted for ``source``."""
        return ClaimBatch(self.runs, self.ended, ((source, len(self.runs)),), self.held)


@dataclass(slots=True, unsafe_hash=True)  # per-run value, never mutated: see ClaimedRun
class AttemptRecord:
    """Evidence of one delivery attempt, as the tenant sees it in run detail."""

    run_id: uuid.UUID
    scheduled_for: datetime
    tenant_id: uuid.UUID
    attempt: int
    started_at: datetime
    finished_at: datetime
    outcome: str
    status_code: int | None
    error: str | None
    duration_ms: int
    response_excerpt: str | None


@dataclass(slots=True, unsafe_hash=True)  # per-run value, never mutated: see ClaimedRun
class RunResolution:
    """The write that ends one leased attempt: succeeded, failed, or retrying later."""

    run_id: uuid.UUID
    scheduled_for: datetime
    status: RunStatus  # SUCCEEDED, FAILED or RETRYING
    attempt_count: int  # the attempt this resolution ends (the lease was taken for it)
    # When RETRYING: a delay, not an instant. The store adds it to Postgres now(), so the
    # next due time is decided by the one clock authority, never by a replica's clock.
    retry_delay_seconds: float | None
    last_status_code: int | None
    last_error: str | None
    attempt: AttemptRecord | None
    lease_generation: int = 0  # the lease this write ends (see ClaimedRun)
    # A 429/503's Retry-After in seconds: holds the run's flow-control key (if it has one)
    # that long on every replica (ADR 0040). None: the receiver asked for no wait.
    hold_seconds: float | None = None
