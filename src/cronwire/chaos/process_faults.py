"""Faults on the replicas' processes: kill -9, SIGSTOP beyond the lease, and rolling
restarts (SIGTERM, one replica after another)."""

from __future__ import annotations

import asyncio
import signal
import time
from datetime import UTC, datetime
from typing import Any

from cronwire.chaos.checks import replica_holding_leases
from cronwire.chaos.queries import Q
from cronwire.chaos.report import common_verdict
from cronwire.chaos.scenario import Groups, Scenario

# -- 1. kill -9 -------------------------------------------------------------------------

async def kill_replicas(s: Scenario) -> None:
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

async def stall_owner(s: Scenario) -> None:
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


async def observe_stall(s: Scenario, _groups: Groups) -> None:
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
    metrics = await owner.metrics(s.http)
    s.figures["fault"].update({
        "reclaimed_while_paused": len(reclaimed),
        "stale_terminal_writes": len(stale),
        "late_results_discarded": int(metrics.get("scheduler_lease_lost_total", 0.0)),
        # A stop that lands between the deliverer's last reading of the send deadline and
        # the write cannot be caught: the request leaves on SIGCONT. The replica sees it
        # and counts it (ADR 0022); at most the one request being written per stop.
        "sends_after_deadline": int(metrics.get("scheduler_sends_after_deadline_total", 0.0)),
    })


def stall_verdict(figures: dict[str, Any]) -> list[str]:
    own = figures["fault_figures"]
    late = own.get("sends_after_deadline", 0)
    # A duplicate the stopped replica itself counted as written after its deadline is the
    # window ADR 0022 leaves open, reported as such; any other is a broken guarantee.
    broken = common_verdict({**figures, "duplicates_beyond_in_flight":
                             max(0, figures["duplicates_beyond_in_flight"] - late)})
    if late > 1:
        broken.append(f"sends_after_deadline={late} (one stop can catch one write)")
    if own.get("stale_terminal_writes"):
        broken.append(f"stale_terminal_writes={own['stale_terminal_writes']}")
    if not own.get("reclaimed_while_paused"):
        broken.append("nothing re-claimed while paused (the fault tested nothing)")
    return broken


# -- 4b. consumers leave and join: graceful restarts ---------------------------------------

async def rolling_restarts(s: Scenario) -> None:
    restarts = 0
    while s.window_left() > 4:
        await asyncio.sleep(s.rng.uniform(2.0, 4.0))
        replica = s.replicas[restarts % len(s.replicas)]
        await replica.stop(15.0)  # SIGTERM: drains, leaves the group
        await replica.start()
        restarts += 1
    s.figures["fault"] = {"graceful_restarts": restarts}
