"""The claim's lease-taking rules (executor.sql's ``decided`` and final UPDATE), shared by
the in-memory claim and sweep so an expired lease is judged the same way by both."""

from __future__ import annotations

import math
from collections.abc import Iterable
from datetime import datetime, timedelta

from cronwire.adapters.memory.database import RUNNABLE, MemoryDatabase, MemoryRun
from cronwire.adapters.memory.flow_gate import admit, give_back, take_slots
from cronwire.adapters.memory.overlap_gate import SUPERSEDED_ERROR, pass_gate
from cronwire.domain.model import (
    MAX_ATTEMPTS,
    ClaimBatch,
    ClaimedRun,
    OverlapPolicy,
    RunStatus,
    SkipReason,
)
from cronwire.domain.overlap import Gate

LEASE_EXPIRED_ERROR = (
    "LeaseExpired: the owner of the final attempt vanished after it started; "
    "not delivered again"
)
CANCELLED_ERROR = "Cancelled: the schedule was deleted while this run was in flight"


def fair_candidates(
    db: MemoryDatabase, limit: int, now: datetime, grace: timedelta = timedelta(0)
) -> list[MemoryRun]:
    """job_run_claim's candidates: expired leases first (turn 0), then runs due at least
    ``grace`` one per tenant per turn, longest-waiting tenants first; at most ``limit``."""
    due_by = now - grace
    expired = sorted(
        (r for r in db.runs.values() if r.status is RunStatus.RUNNING
         and r.claim_expires_at is not None and r.claim_expires_at < now),
        key=lambda r: r.claim_expires_at or now,
    )[:limit]
    earliest: dict[object, datetime] = {}
    by_tenant: dict[object, list[MemoryRun]] = {}
    for run in db.runs.values():
        if run.status not in RUNNABLE:
            continue
        if run.tenant_id not in earliest or run.fire_after < earliest[run.tenant_id]:
            earliest[run.tenant_id] = run.fire_after
        if run.fire_after <= due_by and run.lease_free(now):
            by_tenant.setdefault(run.tenant_id, []).append(run)
    due = sorted((t for t, at in earliest.items() if at <= due_by), key=earliest.__getitem__)
    due = due[:limit]
    per_tenant = min(limit, max(1, math.ceil(2.0 * limit / max(len(due), 1))))
    turns: list[tuple[int, datetime, MemoryRun]] = [(0, r.fire_after, r) for r in expired]
    for tenant in due:
        runs = sorted(by_tenant.get(tenant, []), key=lambda r: r.fire_after)[:per_tenant]
        turns.extend((turn, r.fire_after, r) for turn, r in enumerate(runs, start=1))
    turns.sort(key=lambda t: (t[0], t[1]))
    return [run for _, _, run in turns[:limit]]


def take_leases(
    db: MemoryDatabase, owner: str, candidates: Iterable[MemoryRun], lease_seconds: float
) -> ClaimBatch:
    """Lease each candidate, or end the expired lease the rules say must not run again;
    runs of a flow-control key or a limited tenant are admitted first (flow_gate.admit:
    a run refused stays as it is, not claimed), then runs under an overlap policy pass
    the gate (overlap_gate.pass_gate)."""
    now = db.now()
    runs: list[ClaimedRun] = []
    ended: list[RunStatus] = []
    offered = list(candidates)
    slots, refused = admit(db, offered)
    picked = [run for run in offered if run.id not in refused]
    gates, superseded = pass_gate(db, picked)
    ended.extend([RunStatus.CANCELLED] * superseded)
    for run in picked:
        gated = gates.get(run.id)
        if gated in (Gate.WAIT, Gate.HOLD):
            continue
        schedule = db.schedules[run.schedule_id]
        if gated in (Gate.SKIP, Gate.CANCEL):
            _end_at_gate(run, owner, RunStatus(gated.value), now)
            give_back(db, run)  # an expired lease the gate ends held slots
            ended.append(run.status)
            continue
        verdict = _verdict(run, max(1, min(MAX_ATTEMPTS, schedule.spec.retry.max_attempts)))
        same_attempt = run.status is RunStatus.RUNNING and not run.attempt_started
        run.claimed_by = owner
        run.lease_generation += 1
        run.first_attempt_at = run.first_attempt_at or now
        run.version += 1
        if verdict is not RunStatus.RUNNING:
            run.status = verdict
            run.claim_expires_at = None
            run.finished_at = now
            run.last_error = LEASE_EXPIRED_ERROR if verdict is RunStatus.FAILED else CANCELLED_ERROR
            give_back(db, run)
            ended.append(verdict)
            continue
        if run.status is not RunStatus.RUNNING:  # an expired lease keeps the slots it holds
            take_slots(db, run, slots.get(run.id, 0))
        run.status = RunStatus.RUNNING
        run.attempt_started = False
        run.claim_expires_at = now + timedelta(seconds=lease_seconds)
        run.finished_at = None
        if not same_attempt:
            run.attempt_count = min(run.attempt_count + 1, MAX_ATTEMPTS)
        runs.append(ClaimedRun(
            id=run.id, tenant_id=run.tenant_id, schedule_id=run.schedule_id,
            scheduled_for=run.scheduled_for, idempotency_key=run.idempotency_key,
            trigger=run.trigger, attempt=run.attempt_count, target=schedule.spec.target,
            retry=schedule.spec.retry, signing_secrets=schedule.signing_secrets(now),
            lease_expires_at=run.claim_expires_at, lease_generation=run.lease_generation,
            occurrence=run.replay_of_scheduled_for, flow_key=run.flow_key,
            cancel_other=run.overlap_policy is OverlapPolicy.CANCEL_OTHER,
        ))
    return ClaimBatch(tuple(runs), tuple(ended), held=len(refused))


def _end_at_gate(run: MemoryRun, owner: str, status: RunStatus, now: datetime) -> None:
    """A run the gate skipped or a newer occurrence superseded: never attempted."""
    run.claimed_by = owner
    run.lease_generation += 1
    run.status = status
    run.claim_expires_at = None
    run.finished_at = now
    if status is RunStatus.SKIPPED:
        run.skip_reason = SkipReason.OVERLAP
        run.last_error = ("Skipped: the previous run of this schedule was still running "
                          f"(overlap_policy {run.overlap_policy})")
    else:
        run.last_error = SUPERSEDED_ERROR
    run.version += 1


def _verdict(run: MemoryRun, max_attempts: int) -> RunStatus:
    """RUNNING: lease it; otherwise the terminal status an expired lease ends in."""
    if run.status is not RunStatus.RUNNING:
        return RunStatus.RUNNING
    if run.cancel_requested:
        return RunStatus.CANCELLED
    if run.attempt_started and run.attempt_count >= max_attempts:
        return RunStatus.FAILED
    return RunStatus.RUNNING
