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
run id derived from the occurrence keep it one run). So a duplicate is allowed there
where the new primary holds no attempt for the earlier delivery (its outcome was lost),
and refused elsewhere; so are losses and extra runs.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import asyncpg

from cronwire.chaos.checks import replica_holding_leases
from cronwire.chaos.proxy import ChaosProxy
from cronwire.chaos.queries import Q
from cronwire.chaos.report import Deliveries, Interruption, common_verdict
from cronwire.chaos.scenario import Groups, Scenario

# What a failover manager takes to decide the primary is gone (Patroni's loop_wait is
# 10 s, a cloud's Multi-AZ a minute or two); well inside the scenario's lease of 10 s.
DETECTION_SECONDS = 2.0
PROMOTION_SECONDS = 60.0
LAG_SECONDS = 1.5  # the asynchronous standby's delay at the kill: what it will lose


async def fail_over(s: Scenario) -> None:
    """A synchronous pair: every acknowledged commit is on the standby at the kill."""
    await _fail_over(s, None)


async def fail_over_lagging(s: Scenario) -> None:
    """An asynchronous pair whose standby is behind at the kill: its WAL stream goes
    through a proxy that holds it for LAG_SECONDS before the kill, as a congested link
    or a busy standby would (an idle async standby is often caught up, and a failover
    then loses nothing: that proves little)."""
    assert s.pair is not None
    primary = s.pair.primary
    link = await ChaosProxy(primary.host, primary.port, s.rng).start()
    try:
        await asyncio.to_thread(s.pair.replicate_through, "127.0.0.1", link.port)
        await _fail_over(s, link)
    finally:
        await link.close()


async def _fail_over(s: Scenario, replication: ChaosProxy | None) -> None:
    assert s.pair is not None
    await asyncio.sleep(s.seconds_to(0.35))
    if replication is not None:
        replication.blackhole()
        await asyncio.sleep(LAG_SECONDS)
    # Runs fire on the whole second and the receiver answers 300 ms later: just after a
    # whole second the claims are in and the requests out, waiting for their answers.
    await asyncio.sleep(1 - time.time() % 1 + 0.1)
    await replica_holding_leases(s, within=3.0)
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
        "standby_held_back_seconds": LAG_SECONDS if replication is not None else 0,
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
    own.update(duplicates_by_cause(s.figures.get("attempts_recorded", {}), seen))


def duplicates_by_cause(recorded: dict[str, int], seen: Deliveries) -> dict[str, int]:
    """Each second delivery of a run, by why it happened. The database after the failover
    says it: a delivery the receiver saw but the new primary holds no attempt for had its
    outcome lost (its claim or result was among the commits the standby never received,
    or it was in flight at the kill and its result could not be written under a lease
    the new primary did not know). A run delivered again although every delivery of it is
    recorded was sent a second time after its outcome was safe: a broken guarantee.
    ``recorded`` maps run id -> attempts the database holds."""
    causes = {"outcome_lost": 0, "unexplained": 0}
    for run_id, count in seen.counts.items():
        if count < 2:
            continue
        lost_outcomes = max(0, count - recorded.get(run_id, 0))
        explained = min(count - 1, lost_outcomes)
        causes["outcome_lost"] += explained
        causes["unexplained"] += count - 1 - explained
    return {f"duplicates_{cause}": n for cause, n in causes.items()}


async def observe_failover(s: Scenario, _groups: Groups) -> None:
    """The attempts the new primary holds, per run (after the drain, replicas still up)."""
    tenants = [r["id"] for r in await s.pool.fetch(Q["chaos_tenants"])]
    rows = await s.pool.fetch(Q["chaos_attempts_recorded"], tenants)
    s.figures["attempts_recorded"] = {str(r["run_id"]): r["n"] for r in rows}


def failover_verdict(figures: dict[str, Any]) -> list[str]:
    """Synchronous standby: the outage's guarantees (no loss, no duplicate beyond the
    requests in flight at the kill), and what every failover must keep."""
    return common_verdict(figures) + _every_failover(figures)


def async_failover_verdict(figures: dict[str, Any]) -> list[str]:
    """Asynchronous standby: nothing lost, no second run of one occurrence, and what
    every failover must keep; duplicates whose earlier outcome was lost are allowed."""
    broken = [f"lost={figures['lost']}"] if figures["lost"] else []
    if figures["unplanned_deliveries"]:
        broken.append(f"unplanned_deliveries={figures['unplanned_deliveries']}")
    return broken + _every_failover(figures)


def _every_failover(figures: dict[str, Any]) -> list[str]:
    """Every replica alive, deliveries resumed, no delivery after a recorded outcome."""
    broken = []
    unexplained = figures["fault_figures"].get("duplicates_unexplained", 0)
    if unexplained:
        broken.append(f"duplicates_unexplained={unexplained}")
    if figures["replica_exits"]:
        broken.append(f"replica_exits={figures['replica_exits']}")
    if figures["fault_figures"].get("resumed_seconds_after_promotion") is None:
        broken.append("no delivery after the promotion")
    return broken
