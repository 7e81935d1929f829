"""The ports as a replica of the simulation sees them: the memory adapters behind the
faults (outage, lost acknowledgement, crash inside a call), recorded in the trace, with
the run store's writes checked against lease rule 3 and the receivers' answers."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Collection, Sequence
from datetime import datetime
from typing import Any

from cronwire.adapters.memory import MemoryHints
from cronwire.domain.model import ClaimBatch, LeaseKey, RunResolution, RunStatus
from cronwire.ports import RunKey, RunStore
from cronwire.sim.checker import Checker
from cronwire.sim.database import SimDatabase
from cronwire.sim.faults import FaultState, Life, park
from cronwire.sim.trace import Trace, short

# Methods that are not database calls: no fault applies to them.
_NOT_CALLS = frozenset({"wait_for_work", "close"})


class FaultyPort:
    """Any memory store, each of its coroutine methods a database call under the faults."""

    def __init__(self, inner: Any, life: Life, faults: FaultState, trace: Trace,
                 checker: Checker) -> None:
        self._inner = inner
        self._life = life
        self._faults = faults
        self._trace = trace
        self._checker = checker

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._inner, name)
        if name in _NOT_CALLS or name.startswith("_") or not callable(value):
            return value

        async def call(*args: Any, **kwargs: Any) -> Any:
            life = self._life
            crash = await self._faults.enter(life, name)
            result = await value(*args, **kwargs)
            await self._faults.leave(life, name, crash)
            if isinstance(result, ClaimBatch):
                self._checker.claimed(life, result)
                if result.runs or result.ended:
                    self._trace.add("claim", f"{life.owner} {name} " + " ".join(
                        f"{short(r.id)}#{r.attempt}g{r.lease_generation}" for r in result.runs)
                        + f" ended={len(result.ended)}")
            return result

        return call


Snapshot = dict[tuple[uuid.UUID, datetime], tuple[str | None, int, RunStatus, int]]


class CheckedRunStore:
    """A RunStore whose every write is checked (rule 3) and whose landed results are
    compared with what the receivers answered."""

    def __init__(self, inner: RunStore, db: SimDatabase, checker: Checker, trace: Trace) -> None:
        self._inner = inner
        self._db = db
        self._checker = checker
        self._trace = trace

    def _before(self, keys: Sequence[tuple[tuple[uuid.UUID, datetime], int]]) -> Snapshot:
        rows = {}
        for key, _ in keys:
            row = self._db.runs.get(key)
            if row is not None:
                rows[key] = (row.claimed_by, row.lease_generation, row.status, row.version)
        return rows

    async def _checked(self, owner: str, what: str,
                       keys: Sequence[tuple[tuple[uuid.UUID, datetime], int]],
                       write: Callable[[], Awaitable[Any]]) -> tuple[Any, Snapshot]:
        before = self._before(keys)
        result = await write()
        self._checker.write(owner, keys, before)
        self._trace.add(what, f"{owner} " + " ".join(f"{short(k[0])}g{g}" for k, g in keys)
                        + f" -> {_summary(result)}")
        return result, before

    async def renew_leases(self, owner: str, runs: Sequence[LeaseKey], lease_seconds: float,
                           started: Collection[uuid.UUID] = frozenset()) -> set[uuid.UUID]:
        keys = [((r, s), g) for r, s, g in runs]
        ours: set[uuid.UUID]
        ours, _ = await self._checked(
            owner, "renew", keys,
            lambda: self._inner.renew_leases(owner, runs, lease_seconds, started))
        return ours

    async def superseded(self, owner: str, runs: Sequence[LeaseKey]) -> set[uuid.UUID]:
        """cancel_other's check (ADR 0060): a read, so nothing to check after it."""
        found: set[uuid.UUID] = await self._inner.superseded(owner, runs)
        return found

    async def resolve(self, owner: str, resolutions: Sequence[RunResolution]
                      ) -> dict[uuid.UUID, RunStatus]:
        keys = [((r.run_id, r.scheduled_for), r.lease_generation) for r in resolutions]
        landed: dict[uuid.UUID, RunStatus]
        asked_at = self._db.now()  # a hold runs from the write; it landed at or after this
        landed, before = await self._checked(
            owner, "resolve", keys, lambda: self._inner.resolve(owner, resolutions))
        for r in resolutions:
            key = (r.run_id, r.scheduled_for)
            # Landed, and by this entry: the one naming the generation that was held.
            if r.run_id in landed and key in before and before[key][1] == r.lease_generation:
                row = self._db.runs.get(key)
                if r.hold_seconds is not None and row is not None:
                    self._checker.flow.held(row.tenant_id, row.flow_key, asked_at,
                                            r.hold_seconds)
                attempt = r.attempt
                self._checker.landed(
                    owner, (r.run_id, r.scheduled_for), r.lease_generation, landed[r.run_id],
                    attempt.attempt if attempt is not None else None,
                    attempt.status_code if attempt is not None else None)
        return landed

    async def ended_by_lease(self, owner: str, runs: Sequence[LeaseKey]
                             ) -> dict[uuid.UUID, RunStatus]:
        return await self._inner.ended_by_lease(owner, runs)

    async def fail_minimal(self, owner: str, run_id: uuid.UUID, scheduled_for: datetime,
                           error: str, generation: int) -> bool:
        done: bool
        done, _ = await self._checked(
            owner, "fail-minimal", [((run_id, scheduled_for), generation)],
            lambda: self._inner.fail_minimal(owner, run_id, scheduled_for, error, generation))
        if done:
            self._checker.landed(owner, (run_id, scheduled_for), generation, RunStatus.FAILED,
                                 None, None)
        return done

    async def release(self, owner: str, runs: Sequence[LeaseKey]) -> int:
        count: int
        count, _ = await self._checked(owner, "release", [((r, s), g) for r, s, g in runs],
                                       lambda: self._inner.release(owner, runs))
        return count

    async def defer(self, owner: str, runs: Sequence[LeaseKey], until: datetime) -> int:
        count: int
        count, _ = await self._checked(owner, "defer", [((r, s), g) for r, s, g in runs],
                                       lambda: self._inner.defer(owner, runs, until))
        return count


def _summary(result: object) -> str:
    if isinstance(result, dict):
        return " ".join(f"{short(k)}={v}" for k, v in sorted(result.items(), key=str))
    if isinstance(result, set):
        return " ".join(sorted(short(k) for k in result))
    return repr(result)


class HintsPort:
    """A replica incarnation's consumer of its partition: a dead one takes nothing,
    commits nothing and waits for ever."""

    def __init__(self, partition: MemoryHints, life: Life) -> None:
        self._partition = partition
        self._life = life

    @property
    def healthy(self) -> bool:
        return self._partition.healthy

    @property
    def backlogged(self) -> bool:
        return self._partition.backlogged

    @property
    def buffered(self) -> int:
        return self._partition.buffered

    def take(self, limit: int) -> list[RunKey]:
        return self._partition.take(limit) if self._life.alive else []

    async def wait(self, seconds: float) -> None:
        if not self._life.alive:
            await park()
        await self._partition.wait(seconds)

    def acknowledge(self) -> None:
        if self._life.alive:
            self._partition.acknowledge()

    def rewind(self) -> None:
        if self._life.alive:
            self._partition.rewind()
