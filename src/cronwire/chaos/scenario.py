"""One fault's scenario: how the fault is set up (:class:`FaultSpec`) and what its driver
may touch while the schedules fire (:class:`Scenario`).

A driver runs while the schedules fire (between the first instant and the horizon) and
puts its own figures in ``scenario.figures["fault"]``; ``observe`` runs after the drain
while the replicas are still up; ``summarize`` adds figures computed from the receiver's
records; ``verdict`` lists every broken guarantee (empty: passed).
"""

from __future__ import annotations

import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import aiohttp
import asyncpg

from cronwire.bootstrap.embedded import EmbeddedBroker, EmbeddedPostgres, EmbeddedPostgresPair
from cronwire.chaos.plan import ChaosPlan
from cronwire.chaos.proxy import ChaosProxy
from cronwire.chaos.queries import Q
from cronwire.chaos.report import Deliveries, Interruption, common_verdict
from cronwire.harness.fleet import Replica

Groups = dict[str, set[str]]


def _no_env(_index: int) -> dict[str, str]:
    return {}


@dataclass(frozen=True)
class FaultSpec:
    drive: Callable[[Scenario], Awaitable[None]]
    verdict: Callable[[dict[str, Any]], list[str]] = common_verdict
    observe: Callable[[Scenario, Groups], Awaitable[None]] | None = None
    summarize: Callable[[Scenario, Groups, Deliveries, dict[str, Any]], None] | None = None
    replica_env: Callable[[int], dict[str, str]] = _no_env
    delivery_timeout: float = 2.0  # leases are twice this
    workers: int = 64
    sink_delay_ms: int = 0  # a slow receiver keeps requests in flight
    burst: bool = False
    burst_delay_ms: int = 0
    proxy: bool = False
    victim_proxy: bool = False  # only the first replica's database path goes through it
    needs_own_postgres: bool = False
    # "sync" or "async": the scenario runs on a failover pair of its own (failover.py)
    pair: str | None = None
    modes: tuple[str, ...] = ("postgres", "kafka")
    about: str = ""
    # Why the fault tested nothing in this run (its figures), or None: an INCONCLUSIVE
    # verdict, not a failure (verdicts.py).
    inconclusive: Callable[[dict[str, Any]], str | None] | None = None
    # The size this plan is too small for, as one line naming the flags it needs, or None:
    # a fault whose bound does not fit a small run is not run at that size.
    too_small: Callable[[ChaosPlan], str | None] | None = None



@dataclass
class Scenario:
    """What a fault driver may touch while its scenario runs."""

    plan: ChaosPlan
    spec: FaultSpec
    pool: asyncpg.Pool
    http: aiohttp.ClientSession
    rng: random.Random
    replicas: list[Replica]
    first: datetime
    horizon: datetime
    postgres: EmbeddedPostgres | None
    broker: EmbeddedBroker | None
    proxy: ChaosProxy | None
    pair: EmbeddedPostgresPair | None = None
    interruptions: list[Interruption] = field(default_factory=list)
    figures: dict[str, Any] = field(default_factory=dict)

    def seconds_to(self, fraction: float) -> float:
        """Seconds from now until ``fraction`` of the firing window has passed."""
        at = self.first + (self.horizon - self.first) * fraction
        return max(0.0, (at - datetime.now(self.first.tzinfo)).total_seconds())

    def window_left(self) -> float:
        return (self.horizon - datetime.now(self.first.tzinfo)).total_seconds()

    async def leases_of(self, owner: str) -> dict[str, tuple[int, int]]:
        leases, _expires = await self._held(owner)
        return leases

    async def _held(self, owner: str) -> tuple[dict[str, tuple[int, int]], dict[str, float]]:
        """The owner's leases (run id -> generation, attempts) and when each expires."""
        rows = await self.pool.fetch(Q["chaos_leases_of_owner"], owner)
        return ({str(r["id"]): (r["lease_generation"], r["attempt_count"]) for r in rows},
                {str(r["id"]): float(r["expires"]) for r in rows})

    async def interrupt(self, replica: Replica, kind: str) -> Interruption:
        """kill -9 or SIGSTOP ``replica`` and record the leases it held at that moment."""
        at = time.time()
        if kind == "kill":
            replica.kill()
        else:
            replica.pause()
        found = Interruption(replica.name, kind, at, *await self._held(replica.name))
        self.interruptions.append(found)
        return found
