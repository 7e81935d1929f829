"""Sorts one claim batch by its targets' circuit breakers: deliver now, or wait.

The batch's breakers are read once (one round trip per claim). A closed breaker lets its
runs through; an open one defers them to the end of its cool-down; once the cool-down is
over, one replica wins the half-open probe (a conditional update decides) and delivers
exactly one run, and every other run for that target waits for the probe's outcome.
``report_open_breakers`` is the executor's gauge of the fleet's open breakers.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from uuid import UUID

from cronwire.domain.breaker import Admission, BreakerPolicy, admission, target_key
from cronwire.domain.errors import StorageError
from cronwire.domain.model import ClaimedRun
from cronwire.ports import BreakerStore, Metrics
from cronwire.service.periodic import every

log = logging.getLogger(__name__)
BreakerKey = tuple[UUID, str]


@dataclass
class Sorted:
    deliver: list[tuple[ClaimedRun, str]] = field(default_factory=list)  # (run, target key)
    defer: dict[datetime, list[ClaimedRun]] = field(default_factory=lambda: defaultdict(list))


class BreakerGate:
    def __init__(
        self, store: BreakerStore, *, owner: str, policy: BreakerPolicy, probe_seconds: float
    ) -> None:
        self._store = store
        self._owner = owner
        self._policy = policy
        self._probe_seconds = probe_seconds

    async def sort(self, runs: Sequence[ClaimedRun]) -> Sorted:
        keys = {run.id: (run.tenant_id, target_key(run.target.url)) for run in runs}
        result = Sorted()
        try:
            db_now, states = await self._store.open_states(sorted(set(keys.values())))
        except StorageError:
            # The breaker is advice; the leases are already taken and must not idle.
            log.warning("reading breakers failed; delivering without them", exc_info=True)
            result.deliver = [(run, keys[run.id][1]) for run in runs]
            return result
        probes_tried: set[BreakerKey] = set()
        for run in runs:
            key = keys[run.id]
            state = states.get(key)
            decision, until = (Admission.DELIVER, None) if state is None else admission(
                state, db_now
            )
            if decision is Admission.TRY_PROBE and key not in probes_tried:
                probes_tried.add(key)
                decision = Admission.DELIVER if await self._take_probe(key) else Admission.DEFER
            if decision is Admission.DELIVER:
                result.deliver.append((run, key[1]))
                continue
            if until is None:  # lost the probe, or this batch already sent it
                until = db_now + timedelta(seconds=self._policy.probe_wait_seconds)
            result.defer[until].append(run)
        return result

    async def report_open(self, metrics: Metrics, seconds: float) -> None:
        """The open-breaker gauge, until cancelled (:func:`report_open_breakers`)."""
        await report_open_breakers(self._store, metrics, seconds)

    async def _take_probe(self, key: BreakerKey) -> bool:
        try:
            return await self._store.try_probe(key, self._owner, self._probe_seconds)
        except StorageError:
            log.warning("taking the breaker probe failed", exc_info=True)
            return False


async def report_open_breakers(store: BreakerStore, metrics: Metrics, seconds: float) -> None:
    """scheduler_breaker_open from Postgres every ``seconds``, until cancelled, so every
    executor reports the fleet's view. (The backlog gauge is the fleet gauges' loop, on
    every replica.)"""

    async def sample() -> None:
        metrics.set_breakers_open(await store.open_count())

    await every(seconds, None, sample, "breaker gauge")
