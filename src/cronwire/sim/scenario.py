"""What one seed simulates: the tenants' schedules, their receivers, the faults and the
tenants' own actions, all drawn from the seed before anything runs.

Every fault and action is one item of :attr:`Scenario.items`, so a failing scenario can
be shrunk by dropping items one at a time (:mod:`cronwire.sim.shrink`) and replayed
without the ones that did not matter.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta

from cronwire.domain.flow_control import FlowControl
from cronwire.domain.model import OverlapPolicy, RetryPolicy

MODES = ("postgres", "kafka")
REPLICAS = 3
TENANTS = 2
# Cron periods in seconds (six-field cron): short, so an hour has many occurrences.
PERIODS = (5, 10, 15, 20, 30)
POLICIES = tuple(OverlapPolicy)
EPOCH = datetime(2031, 3, 1, tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class SimOptions:
    schedules: int = 6
    hours: float = 0.0125  # 45 s of faults (CI size), then the fault-free tail
    mode: str = "postgres"
    mutation: str | None = None  # a known bug class put back (tests only): see mutations.py

    @property
    def seconds(self) -> float:
        return self.hours * 3600.0


@dataclass(frozen=True, slots=True)
class Receiver:
    """How one schedule's receiver answers: the chances of each misbehaviour per request
    (the rest are 200s), and its latency in seconds."""

    fail: float = 0.0
    throttle: float = 0.0
    hang: float = 0.0
    late: float = 0.0
    latency: tuple[float, float] = (0.01, 0.3)


@dataclass(frozen=True, slots=True)
class SimSchedule:
    index: int
    tenant: int
    period: int
    policy: OverlapPolicy
    retry: RetryPolicy
    jitter: int
    flow: FlowControl | None = None  # None: no flow control

    @property
    def cron(self) -> str:
        return f"*/{self.period} * * * * *"


# -- the items: faults and tenant actions ---------------------------------------------


@dataclass(frozen=True, slots=True)
class Crash:
    """Replica ``replica`` dies at ``at`` (or, ``in_call``, inside its first database call
    from then on, after the call applied when ``applied``) and restarts ``down`` s later."""

    replica: int
    at: float
    down: float
    in_call: bool = False
    applied: bool = False


@dataclass(frozen=True, slots=True)
class Stall:
    """Replica ``replica`` is stopped (SIGSTOP) for [at, at + seconds): nothing it sends
    or receives moves until then; its leases may expire while it lives."""

    replica: int
    at: float
    seconds: float


@dataclass(frozen=True, slots=True)
class Outage:
    """The database raises StorageError for every call in [at, at + seconds)."""

    at: float
    seconds: float


@dataclass(frozen=True, slots=True)
class LostAck:
    """The ``call``-th database call of ``replica`` applies, and then raises."""

    replica: int
    call: int


@dataclass(frozen=True, slots=True)
class ClockJump:
    """The wall clock of ``replica`` (never the database's) jumps by ``seconds``."""

    replica: int
    at: float
    seconds: float


@dataclass(frozen=True, slots=True)
class Misbehaving:
    """Schedule ``schedule``'s receiver answers as ``receiver`` (else: quick 200s)."""

    schedule: int
    receiver: Receiver


@dataclass(frozen=True, slots=True)
class LostHint:
    """Kafka mode: the ``key``-th key published is acknowledged and never delivered."""

    key: int


@dataclass(frozen=True, slots=True)
class Backfill:
    """A tenant backfills the last ``minutes`` of schedule ``schedule`` at ``at``."""

    schedule: int
    at: float
    minutes: int


@dataclass(frozen=True, slots=True)
class Trigger:
    schedule: int
    at: float


@dataclass(frozen=True, slots=True)
class Delete:
    """A tenant deletes schedule ``schedule`` at ``at`` (its runs in flight finish
    cancelled; nothing more is planned)."""

    schedule: int
    at: float


Item = (Crash | Stall | Outage | LostAck | ClockJump | Misbehaving | LostHint | Backfill
        | Trigger | Delete)


@dataclass(frozen=True, slots=True)
class Scenario:
    seed: int
    options: SimOptions
    start: datetime
    schedules: tuple[SimSchedule, ...]
    items: tuple[Item, ...] = field(default=())

    def without(self, index: int) -> Scenario:
        return replace(self, items=self.items[:index] + self.items[index + 1:])

    def receiver(self, schedule: int) -> Receiver:
        for item in self.items:
            if isinstance(item, Misbehaving) and item.schedule == schedule:
                return item.receiver
        return Receiver()


def draw(seed: int, options: SimOptions) -> Scenario:
    """The scenario of ``seed``: a pure function of the seed and the options."""
    rng = random.Random(f"cronwire-sim/{seed}")
    horizon = options.seconds
    start = EPOCH + timedelta(seconds=rng.randrange(0, 86_400))
    schedules = tuple(
        SimSchedule(
            index=i, tenant=i % TENANTS, period=rng.choice(PERIODS),
            policy=rng.choice(POLICIES),
            retry=RetryPolicy(max_attempts=rng.randint(1, 4),
                              initial_backoff_seconds=float(rng.randint(1, 3)),
                              max_backoff_seconds=float(rng.randint(3, 8))),
            jitter=rng.choice((0, 0, 0, 2)),
        )
        for i in range(options.schedules)
    )
    items: list[Item] = []
    for s in schedules:
        if rng.random() < 0.7:
            items.append(Misbehaving(s.index, Receiver(
                fail=rng.choice((0.0, 0.1, 0.3)), throttle=rng.choice((0.0, 0.1, 0.2)),
                hang=rng.choice((0.0, 0.05, 0.2)), late=rng.choice((0.0, 0.05, 0.1)),
                latency=(0.01, rng.choice((0.3, 1.0, 2.5))),
            )))
    tens = max(0.5, horizon / 600.0)  # the means below are per ten simulated minutes
    for _ in range(_count(rng, 2 * tens)):
        items.append(Crash(rng.randrange(REPLICAS), rng.uniform(5, horizon),
                           rng.uniform(1, 20), in_call=rng.random() < 0.5,
                           applied=rng.random() < 0.5))
    for _ in range(_count(rng, 2 * tens)):
        items.append(Outage(rng.uniform(5, horizon), rng.choice((0.5, 2.0, 5.0, 12.0))))
    for _ in range(_count(rng, 2 * tens)):
        items.append(Stall(rng.randrange(REPLICAS), rng.uniform(5, horizon),
                           rng.choice((1.0, 5.0, 8.0, 12.0))))
    for _ in range(_count(rng, 4 * tens)):
        items.append(LostAck(rng.randrange(REPLICAS), rng.randrange(1, 400)))
    for _ in range(_count(rng, 1 * tens)):
        items.append(ClockJump(rng.randrange(REPLICAS), rng.uniform(5, horizon),
                               rng.choice((-3600.0, -30.0, 30.0, 7200.0))))
    if options.mode == "kafka":
        for _ in range(_count(rng, 3 * tens)):
            items.append(LostHint(rng.randrange(1, 300)))
    for _ in range(_count(rng, 1 * tens)):
        items.append(Backfill(rng.randrange(len(schedules)), rng.uniform(30, horizon),
                              rng.randint(1, 3)))
    for _ in range(_count(rng, 1 * tens)):
        items.append(Trigger(rng.randrange(len(schedules)), rng.uniform(5, horizon)))
    # Drawn last, so that the items above are the same with or without it.
    if rng.random() < 0.25:
        items.append(Delete(rng.randrange(len(schedules)), rng.uniform(10, horizon)))
    return Scenario(seed, options, start, _with_flow_control(seed, schedules), tuple(items))


def _with_flow_control(seed: int, schedules: tuple[SimSchedule, ...]
                       ) -> tuple[SimSchedule, ...]:
    """Flow control on some schedules, from a generator of its own (the rest of a seed's
    scenario is what it was before flow control was simulated). A key is a schedule's
    own (its receiver's origin) or shared by its tenant's schedules under one name; the
    limits leave room for the schedules' rate, so a backlog at the end is a fault's."""
    rng = random.Random(f"cronwire-sim/{seed}/flow")
    shared = {tenant: rng.random() < 0.5 for tenant in range(TENANTS)}
    flowed = []
    for s in schedules:
        if rng.random() < 0.4:
            rate = rng.choice((None, 2.0, 5.0))
            flow = FlowControl(
                key=f"shared-{s.tenant}" if shared[s.tenant] else None,
                max_concurrency=rng.choice((None, 2, 3)), rate_per_second=rate,
                burst=rng.choice((None, 3)) if rate is not None else None)
            s = replace(s, flow=flow)
        flowed.append(s)
    return tuple(flowed)


def _count(rng: random.Random, mean: float) -> int:
    """Between 0 and twice ``mean``, uniformly (a fault-free seed now and then)."""
    return rng.randint(0, max(1, round(2 * mean)))
