"""The failover faults: the scenario runs on a primary and a hot standby of its own
(synchronous for ``failover``, asynchronous for ``failover-async``); the primary's
postmaster is killed with SIGKILL while requests are in flight, and after a detection
time the standby is promoted. The replicas are left alone: they must carry on by
themselves, on the URL that names both servers.

Figures: how long the database was away, when deliveries resumed after the promotion,
how late the runs that fell due meanwhile went out. With a synchronous standby every
acknowledged commit survives, so the verdict is the outage's: nothing lost, no duplicate
beyond the requests in flight at the kill, no replica exited. With an asynchronous one,
commits the standby had not received are gone: results written (the run goes out again),
claims taken, runs planned (planned again, under the same run id: the unique key and the
run id derived from the occurrence keep it one run). So duplicates are reported there,
not refused; losses and extra runs still are.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import asyncpg

from cronwire.chaos.checks import replica_holding_leases
from cronwire.chaos.queries import Q
from cronwire.chaos.report import Deliveries, Interruption, common_verdict
from cronwire.chaos.scenario import Groups, Scenario

# What a failover manager takes to decide the primary is gone (Patroni's loop_wait is
# 10 s, a cloud's Multi-AZ a minute or two); well inside the scenario's lease of 10 s.
DETECTION_SECONDS = 2.0
PROMOTION_SECONDS = 60.0


async def fail_over(s: Scenario) -> None:
    assert s.pair is not None
    await asyncio.sleep(s.seconds_to(0.35))
    await replica_holding_leases(s, within=3.0)  # so that requests are in flight
    behind = int(await s.pool.fetchval(Q["chaos_standby_behind_bytes"]))
    leases = {str(r["id"]): (r["lease_generation"], r["attempt_count"])
              for r in await s.pool.fetch(Q["chaos_leases_held"])}
    killed_at = time.time()
    await asyncio.to_thread(s.pair.kill_primary)
    s.interruptions.append(Interruption("primary", "failover", killed_at, leases))
    await asyncio.sleep(DETECTION_SECONDS)
    promoting = asyncio.create_task(asyncio.to_thread(s.pair.promote))
    promoted_at = await _promoted(s.pair.standby.dsn)
    await promoting
    s.figures["fault"] = {
        "synchronous": s.pair.synchronous,
        "standby_behind_bytes_at_kill": behind,
        "leases_held_at_kill": len(leases),
        "outage_seconds": round(promoted_at - killed_at, 2),
        "lease_seconds": 2 * s.spec.delivery_timeout,
        "killed_at": killed_at,
        "promoted_at": promoted_at,
    }


async def _promoted(standby_dsn: str) -> float:
    """The instant the standby answers as a primary (pg_ctl's own wait polls every 100 ms,
    and its thread adds more: too coarse for a figure measured in tenths of seconds)."""
    conn = await asyncpg.connect(standby_dsn)
    try:
        deadline = time.monotonic() + PROMOTION_SECONDS
        while await conn.fetchval(Q["chaos_in_recovery"]):
            if time.monotonic() > deadline:
                raise TimeoutError(f"the standby was not promoted within {PROMOTION_SECONDS}s")
            await asyncio.sleep(0.01)
        return time.time()
    finally:
        await conn.close()


def summarize_failover(s: Scenario, _groups: Groups, seen: Deliveries,
                       figures: dict[str, Any]) -> None:
    """When deliveries resumed after the promotion, and how late the runs due while there
    was no primary went out (seconds after the promotion)."""
    own = figures["fault_figures"]
    if "promoted_at" not in own:
        return
    killed_at, promoted_at = own.pop("killed_at"), own.pop("promoted_at")
    arrivals = sorted(at for times in seen.arrivals.values() for at in times)
    after = [at for at in arrivals if at >= promoted_at]
    own["deliveries_while_away"] = sum(1 for at in arrivals if killed_at <= at < promoted_at)
    own["resumed_seconds_after_promotion"] = round(after[0] - promoted_at, 2) if after else None
    due_meanwhile = [r for r, due in s.figures["planned_due"].items()
                     if killed_at <= due < promoted_at and r in seen.first_seen]
    own["runs_due_while_away"] = len(due_meanwhile)
    own["caught_up_seconds_after_promotion"] = round(
        max(seen.first_seen[r] for r in due_meanwhile) - promoted_at, 2) if due_meanwhile else None


def failover_verdict(figures: dict[str, Any]) -> list[str]:
    """Synchronous standby: the outage's guarantees, and deliveries resumed."""
    broken = common_verdict(figures) + _alive_and_resumed(figures)
    return broken


def async_failover_verdict(figures: dict[str, Any]) -> list[str]:
    """Asynchronous standby: nothing lost, no second run of one occurrence, every replica
    alive; duplicates (lost results delivered again) are reported, not refused."""
    broken = [f"lost={figures['lost']}"] if figures["lost"] else []
    if figures["unplanned_deliveries"]:
        broken.append(f"unplanned_deliveries={figures['unplanned_deliveries']}")
    return broken + _alive_and_resumed(figures)


def _alive_and_resumed(figures: dict[str, Any]) -> list[str]:
    broken = []
    if figures["replica_exits"]:
        broken.append(f"replica_exits={figures['replica_exits']}")
    if figures["fault_figures"].get("resumed_seconds_after_promotion") is None:
        broken.append("no delivery after the promotion")
    return broken
