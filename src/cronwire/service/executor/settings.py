"""The executor's numbers, fixed for the life of a replica (from SCHEDULER_* in a serving
replica, chosen by hand in the tests, the simulator and the benchmarks)."""

from __future__ import annotations

from dataclasses import dataclass, field

from cronwire.domain.breaker import BreakerPolicy


@dataclass(frozen=True, slots=True)
class ExecutorSettings:
    owner: str  # this replica's name on its leases (claimed_by)
    workers: int  # deliveries in flight at most
    batch: int  # runs one claim asks for at most
    lease_seconds: float
    delivery_timeout: float  # one attempt's limit, seconds
    grace_seconds: float  # shutdown: how long deliveries in flight may finish
    breaker_policy: BreakerPolicy = field(default_factory=BreakerPolicy)
    poll_seconds: float = 0.25  # the longest wait between claims when nothing wakes the loop
    gauge_seconds: float = 2.0  # how often the open-breaker gauge is read
    max_write_batch: int = 500  # results in one resolve statement at most
