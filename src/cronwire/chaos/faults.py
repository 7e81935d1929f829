"""The faults: how each one is set up and driven, the figures it adds, and the verdict.

A driver runs while the schedules fire (between the first instant and the horizon) and
puts its own figures in ``scenario.figures["fault"]``; ``observe`` runs after the drain
while the replicas are still up; ``summarize`` adds figures computed from the receiver's
records; ``verdict`` lists every broken guarantee (empty: passed).
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from cronwire.adapters.skewed_clock import SKEW_VARIABLE
from cronwire.chaos.checks import common_verdict, replica_holding_leases
from cronwire.chaos.lease_cut import (
    cut_lease_renewal,
    lease_cut_verdict,
    observe_lease_cut,
    summarize_lease_cut,
)
from cronwire.chaos.queries import Q
from cronwire.chaos.report import Deliveries, percentile

if TYPE_CHECKING:
    from cronwire.chaos.harness import Scenario

Groups = dict[str, set[str]]
CLOCK_SKEWS = (30.0, -30.0)  # replica 0 runs 30 s fast, replica 1 30 s slow
LATE_SECONDS = 5.0  # a run first seen this long after it was due counts as late
FAIR_LAG_P99_MS = 2000.0
KAFKA_SESSION_TIMEOUT_SECONDS = 10.0  # aiokafka's default consumer session timeout


def _no_env(_index: int) -> dict[str, str]:
    return {}


def _skewed_env(index: int) -> dict[str, str]:
    return {SKEW_VARIABLE: str(CLOCK_SKEWS[index])} if index < len(CLOCK_SKEWS) else {}


def _no_duplicates_no_exits(figures: dict[str, Any]) -> list[str]:
    broken = common_verdict(figures)
    if figures["duplicates"] and not broken:
        broken.append(f"duplicates={figures['duplicates']}")
    if figures["replica_exits"]:
        broken.append(f"replica_exits={figures['replica_exits']}")
    return broken


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
    modes: tuple[str, ...] = ("postgres", "kafka")
    about: str = ""


# -- 1. kill -9 -------------------------------------------------------------------------

async def _kill_replicas(s: Scenario) -> None:
    kills = leases = 0
    while s.window_left() > 3:
        await asyncio.sleep(s.rng.uniform(2.0, 4.0))
        if s.window_left() < 2:
            break
        victim = await replica_holding_leases(s, within=1.5) or s.rng.choice(s.replicas)
        # Somewhere between just after its claim and mid-request (the sink is slow), so
        # some kills find requests not yet sent and some find requests already out.
        await asyncio.sleep(s.rng.uniform(0.0, 0.4))
        found = await s.interrupt(victim, "kill")
        kills += 1
        leases += len(found.leases)
        await victim.start()
    s.figures["fault"] = {"kills": kills, "leases_held_at_kill": leases}


# -- 2. SIGSTOP beyond the lease ---------------------------------------------------------

async def _stall_owner(s: Scenario) -> None:
    await asyncio.sleep(s.seconds_to(0.3))
    # Every schedule fires on the whole second and the sink answers 300 ms later: from
    # just before a whole second, the first replica seen holding leases has just claimed
    # them, and is stopped well before its results could be written.
    await asyncio.sleep(1 - time.time() % 1)
    victim = await replica_holding_leases(s, within=10)
    if victim is None:
        s.figures["fault"] = {"paused_leases": 0}
        return
    # At once: right after its claim, usually before its requests have left, which is
    # where a stale owner could still send after SIGCONT.
    found = await s.interrupt(victim, "stop")
    pause = 2 * s.spec.delivery_timeout + s.spec.delivery_timeout  # the lease and then some
    await asyncio.sleep(pause)
    victim.signal(signal.SIGCONT)
    s.figures["fault"] = {"paused": victim.name, "paused_seconds": round(pause, 1),
                          "lease_seconds": 2 * s.spec.delivery_timeout,
                          "paused_leases": len(found.leases)}


async def _observe_stall(s: Scenario, _groups: Groups) -> None:
    stops = [i for i in s.interruptions if i.kind == "stop"]
    if not stops:
        return
    stop = stops[0]
    ids = list(stop.leases)
    state = {str(r["id"]): r for r in await s.pool.fetch(Q["chaos_runs_state"], ids)}
    reclaimed = [r for r in ids if state[r]["lease_generation"] != stop.leases[r][0]]
    paused_at = datetime.fromtimestamp(stop.at, UTC)
    stale = [
        row for row in await s.pool.fetch(Q["chaos_attempts_of_owner"], stop.owner, reclaimed)
        if row["attempt"] == stop.leases[str(row["run_id"])][1] and row["started_at"] < paused_at
    ]
    owner = next(r for r in s.replicas if r.name == stop.owner)
    lease_lost = (await owner.metrics(s.http)).get("scheduler_lease_lost_total", 0.0)
    s.figures["fault"].update({
        "reclaimed_while_paused": len(reclaimed),
        "stale_terminal_writes": len(stale),
        "late_results_discarded": int(lease_lost),
    })


def _stall_verdict(figures: dict[str, Any]) -> list[str]:
    broken = common_verdict(figures)
    own = figures["fault_figures"]
    if own.get("stale_terminal_writes"):
        broken.append(f"stale_terminal_writes={own['stale_terminal_writes']}")
    if not own.get("reclaimed_while_paused"):
        broken.append("nothing re-claimed while paused (the fault tested nothing)")
    return broken


# -- 3. Postgres restarts and connection cuts -------------------------------------------

async def _restart_postgres(s: Scenario) -> None:
    assert s.postgres is not None
    outages = []
    for fraction in (0.3, 0.65):
        await asyncio.sleep(s.seconds_to(fraction))
        began = time.monotonic()
        await asyncio.to_thread(s.postgres.stop)
        await asyncio.sleep(0.5)
        await asyncio.to_thread(s.postgres.start)
        outages.append(round(time.monotonic() - began, 2))
    s.figures["fault"] = {"restarts": len(outages), "outage_seconds": outages,
                          "lease_seconds": 2 * s.spec.delivery_timeout}


async def _cut_connections(s: Scenario) -> None:
    assert s.proxy is not None
    counts: Counter[str] = Counter()
    longest = 0.0
    while s.window_left() > 1.5:
        await asyncio.sleep(s.rng.uniform(0.4, 1.2))
        action = s.rng.choice(("drop", "reset", "stall"))
        counts[action] += 1
        if action == "drop":
            counts["connections_dropped"] += s.proxy.drop(0.3)
        elif action == "reset":
            counts["connections_reset"] += s.proxy.reset(0.3)
        else:
            seconds = s.rng.uniform(0.3, 2.0)
            longest = max(longest, seconds)
            await s.proxy.stall(seconds)
    s.figures["fault"] = {**counts, "longest_stall_seconds": round(longest, 2),
                          "connections_opened": s.proxy.connections,
                          "lease_seconds": 2 * s.spec.delivery_timeout}


# -- 4. Kafka: the broker dies or stalls; consumers leave and join ----------------------

async def _restart_broker(s: Scenario) -> None:
    assert s.broker is not None
    for fraction in (0.3, 0.65):
        await asyncio.sleep(s.seconds_to(fraction))
        await asyncio.to_thread(s.broker.stop)  # memory storage: topics and offsets are gone
        await asyncio.to_thread(s.broker.start)
    s.figures["fault"] = {"broker_restarts": 2}


async def _stall_broker(s: Scenario) -> None:
    assert s.broker is not None
    process = getattr(s.broker, "_process", None)
    assert process is not None
    await asyncio.sleep(s.seconds_to(0.2))
    seconds = KAFKA_SESSION_TIMEOUT_SECONDS + 2
    process.send_signal(signal.SIGSTOP)
    try:
        await asyncio.sleep(seconds)
    finally:
        process.send_signal(signal.SIGCONT)
    s.figures["fault"] = {"broker_stopped_seconds": seconds}


async def _rolling_restarts(s: Scenario) -> None:
    restarts = 0
    while s.window_left() > 4:
        await asyncio.sleep(s.rng.uniform(2.0, 4.0))
        replica = s.replicas[restarts % len(s.replicas)]
        await asyncio.to_thread(replica.stop)  # SIGTERM: drains, leaves the group
        await replica.start()
        restarts += 1
    s.figures["fault"] = {"graceful_restarts": restarts}


# -- 5. clock skew -----------------------------------------------------------------------

async def _just_fire(_s: Scenario) -> None:
    """The skew is in the replicas' clocks from the start; nothing to do meanwhile."""


async def _observe_skew(s: Scenario, _groups: Groups) -> None:
    gauges = {}
    for replica in s.replicas:
        samples = await replica.metrics(s.http)
        gauges[replica.name] = round(samples.get("scheduler_clock_skew_seconds", float("nan")), 2)
    owners = {str(r["id"]): r["claimed_by"]
              for r in await s.pool.fetch(Q["chaos_final_owner"], await _tenants(s))}
    s.figures["fault"] = {"skew_gauge_seconds": gauges}
    s.figures["owners"] = owners


async def _tenants(s: Scenario) -> list[Any]:
    return [r["id"] for r in await s.pool.fetch("SELECT id FROM tenant")]


def _summarize_skew(s: Scenario, groups: Groups, seen: Deliveries, figures: dict[str, Any]) -> None:
    planned = s.figures.get("planned_due", {})
    owners: dict[str, str] = s.figures.get("owners", {})
    early = late = 0
    lags: dict[str, list[float]] = {}
    for run_id, due in planned.items():
        at = seen.first_seen.get(run_id)
        if at is None:
            continue
        early += at < due
        late += at - due > LATE_SECONDS
        lags.setdefault(owners.get(run_id, "?"), []).append(at - due)
    own = figures["fault_figures"]
    own.update({
        "skews_injected": {f"{s.replicas[i].name}": CLOCK_SKEWS[i]
                           for i in range(min(len(CLOCK_SKEWS), len(s.replicas)))},
        "early": early, "late": late,
        "lag_p99_ms_by_replica": {k: round(percentile(v, 0.99) * 1000, 1)
                                  for k, v in sorted(lags.items())},
    })


def _skew_verdict(figures: dict[str, Any]) -> list[str]:
    broken = common_verdict(figures)
    own = figures["fault_figures"]
    for key in ("early", "late"):
        if own.get(key):
            broken.append(f"{key}={own[key]}")
    if figures["duplicates"]:
        broken.append(f"duplicates={figures['duplicates']}")
    gauges = own.get("skew_gauge_seconds", {})
    for name, injected in own.get("skews_injected", {}).items():
        shown = gauges.get(name)
        if shown is None or not abs(shown - injected) < 2:
            broken.append(f"{name} skew gauge {shown} != {injected}")
    return broken


# -- 6. fairness -------------------------------------------------------------------------

def _summarize_fairness(s: Scenario, groups: Groups, seen: Deliveries, figures: dict[str, Any]) -> None:
    planned = s.figures.get("planned_due", {})
    burst_seen = [seen.first_seen[r] for r in groups["burst"] if r in seen.first_seen]
    drained_at = max(burst_seen) if burst_seen else s.first.timestamp()
    during = [seen.first_seen[r] - planned[r] for r in groups["steady"]
              if r in seen.first_seen and planned[r] <= drained_at]
    figures["fault_figures"].update({
        "burst_runs": len(groups["burst"]),
        "burst_drain_seconds": round(drained_at - s.first.timestamp(), 2),
        "small_tenants": 9,
        "small_runs_during_burst": len(during),
        "small_lag_p50_ms": round(percentile(during, 0.5) * 1000, 1),
        "small_lag_p99_ms": round(percentile(during, 0.99) * 1000, 1),
    })


def _fairness_verdict(figures: dict[str, Any]) -> list[str]:
    broken = common_verdict(figures)
    own = figures["fault_figures"]
    if not own.get("small_runs_during_burst"):
        broken.append("no small-tenant run fell due while the burst drained")
    elif own["small_lag_p99_ms"] >= FAIR_LAG_P99_MS:
        broken.append(f"small_lag_p99_ms={own['small_lag_p99_ms']} >= {FAIR_LAG_P99_MS}")
    return broken


FAULTS: dict[str, FaultSpec] = {
    "kill": FaultSpec(_kill_replicas, sink_delay_ms=300,
                      about="kill -9 a random replica every 2-4 s and restart it"),
    "stall": FaultSpec(_stall_owner, verdict=_stall_verdict, observe=_observe_stall,
                       delivery_timeout=1.5, sink_delay_ms=300,
                       about="SIGSTOP a replica holding leases for 1.5 x its lease, then SIGCONT"),
    "pg-restart": FaultSpec(_restart_postgres, verdict=_no_duplicates_no_exits,
                            delivery_timeout=5.0, sink_delay_ms=50, needs_own_postgres=True,
                            about="pg_ctl stop -m fast / start, twice"),
    "connection-cuts": FaultSpec(_cut_connections, verdict=_no_duplicates_no_exits,
                                 delivery_timeout=5.0, sink_delay_ms=50, proxy=True,
                                 about="a TCP proxy drops, resets and stalls database connections"),
    "lease-cut": FaultSpec(cut_lease_renewal, verdict=lease_cut_verdict,
                           observe=observe_lease_cut, summarize=summarize_lease_cut,
                           delivery_timeout=1.5, sink_delay_ms=300, victim_proxy=True,
                           # In kafka mode the cut-off replica often held no partition in
                           # reduced runs (the group kept rebalancing): nothing to cut off.
                           modes=("postgres",),
                           about="one replica's database path blackholed for 2 x its lease "
                                 "while its HTTP path works"),
    # Few workers and a slightly slow receiver: a claim takes only part of each second's
    # runs, so every replica, the skewed ones too, delivers some (with 64 workers the first
    # replica awake took all of them, and a skewed one could lose every race).
    "clock-skew": FaultSpec(_just_fire, verdict=_skew_verdict, observe=_observe_skew,
                            summarize=_summarize_skew, replica_env=_skewed_env,
                            workers=8, sink_delay_ms=20,
                            about="replica clocks +30 s and -30 s"),
    "fairness": FaultSpec(_just_fire, verdict=_fairness_verdict, summarize=_summarize_fairness,
                          burst=True, burst_delay_ms=100, workers=32, delivery_timeout=5.0,
                          about="one tenant's burst due at once, nine tenants firing every second"),
    "rolling-restart": FaultSpec(_rolling_restarts, verdict=_no_duplicates_no_exits,
                                 sink_delay_ms=50,
                                 about="SIGTERM and restart one replica after another"),
    "broker-kill": FaultSpec(_restart_broker, sink_delay_ms=50, modes=("kafka",),
                             about="kill and restart the broker (its memory is lost), twice"),
    "broker-stall": FaultSpec(_stall_broker, sink_delay_ms=50, modes=("kafka",),
                              about="SIGSTOP the broker beyond the consumer session timeout"),
}

DEFAULT_FAULTS = {
    "postgres": ("kill", "stall", "pg-restart", "connection-cuts", "lease-cut", "clock-skew",
                 "fairness"),
    "kafka": ("kill", "stall", "broker-kill", "broker-stall", "rolling-restart", "fairness"),
}
