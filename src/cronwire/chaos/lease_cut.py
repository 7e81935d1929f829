"""The lease-cut fault: one replica's database path blackholed right after one of its
claims, for longer than its lease, while its HTTP path keeps working (ADR 0017)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from datetime import UTC, datetime
from typing import Any

from cronwire.chaos.checks import replica_holding_leases_named
from cronwire.chaos.queries import Q
from cronwire.chaos.report import Deliveries, Interruption, common_verdict
from cronwire.chaos.scenario import Groups, Scenario

# The call of the lease-taking tail every claim statement makes (job_run_claim,
# job_run_claim_keys, job_run_sweep): the proxy recognises the victim's claims by it.
CLAIM_MARKER = b"cronwire_claim_tail("
CUT_TRIES = 8
RECOVERY_WINDOW_SECONDS = 5.0  # firing time after a cut ends in which a replica must work again


# -- 3b. a replica that cannot renew its leases stops delivering -------------------------
#
# The first replica's database connections go through the proxy, its HTTP path to the
# sink does not. The proxy is blackholed (bytes held, nothing closed, new connections
# just as silent) for twice the lease while the replica holds leases. Until a lease runs
# out its owner may still send (that request is in flight at the cut); after that, only
# the replica that re-claimed the run may. Every arrival of a run cut off this way after
# its lease expired, beyond the re-claimer's one, is a delivery the cut-off replica
# should not have started: ``sends_beyond_in_flight_at_cut`` must be 0. The replica
# cannot claim anything while cut off, so the runs it held are the only ones it could
# send; the common figures cover every other run.

async def cut_lease_renewal(s: Scenario) -> None:
    assert s.proxy is not None
    victim = s.replicas[0]
    lease = 2 * s.spec.delivery_timeout
    await asyncio.sleep(s.seconds_to(0.1))
    # Cut right after one of its claims has gone through: Postgres takes the leases, the
    # replica hears of them only when the cut ends, long after they ran out. That is the
    # case where a replica must not send what it holds. (If no claim comes, cut anyway.)
    after_claim = False
    for _try in range(CUT_TRIES):
        await asyncio.sleep(max(0.0, 1 - time.time() % 1 - 0.05))  # the next fire is near
        before = await s.leases_of(victim.name)
        triggered = s.proxy.blackhole_after_watched()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(triggered.wait(), 1.5)
        await asyncio.sleep(0.2)  # the claim commits
        if triggered.is_set() and set(await s.leases_of(victim.name)) - set(before):
            after_claim = True
            break
        s.proxy.release()  # an empty claim (or none): a cut this short is harmless, again
    if not after_claim:
        # Its claims lost every race (a loaded machine): cut while it holds leases, then.
        await replica_holding_leases_named(s, victim, within=10)
        s.proxy.blackhole()
    at = time.time()
    held: dict[str, tuple[int, int]] = {}
    expiry: dict[str, float] = {}
    hold = 2 * lease
    while time.time() < at + hold:
        # Every lease it took (before the cut, or during it by a statement that got
        # through) and the latest expiry a renewal that got through gave it.
        for run_id, found in (await s.leases_of(victim.name)).items():
            held.setdefault(run_id, found)
        rows = await s.pool.fetch(Q["chaos_lease_expiry"], list(held), victim.name)
        for row in rows:
            run_id = str(row["id"])
            if row["lease_generation"] == held[run_id][0]:
                expiry[run_id] = max(expiry.get(run_id, 0.0), float(row["expires"]))
        await asyncio.sleep(0.1)
    s.proxy.release()
    s.figures["released_at"] = time.time()
    s.figures["lease_expiry"] = expiry
    s.figures["cut_at"] = at
    # For the common accounting, as for a kill: a duplicate of one of these runs is in
    # flight at the cut if its first request had arrived by the cut.
    s.interruptions.append(Interruption(victim.name, "cut", at, held))
    s.figures["fault"] = {"cut": victim.name, "cut_seconds": round(time.time() - at, 1),
                          "lease_seconds": lease, "cut_after_a_claim": after_claim,
                          "leases_cut_off": len(held),
                          "firing_seconds_after_release": round(max(0.0, s.window_left()), 1)}


async def observe_lease_cut(s: Scenario, _groups: Groups) -> None:
    cuts = [i for i in s.interruptions if i.kind == "cut"]
    if not cuts:
        return
    cut = cuts[0]
    state = {str(r["id"]): r for r in await s.pool.fetch(Q["chaos_runs_state"], list(cut.leases))}
    reclaimed = [r for r, (generation, _attempts) in cut.leases.items()
                 if r in state and state[r]["lease_generation"] != generation]
    released = datetime.fromtimestamp(float(s.figures["released_at"]), UTC)
    since = await s.pool.fetchval(Q["chaos_owner_runs_since"], cut.owner, released)
    s.figures["fault"].update({"reclaimed_after_expiry": len(reclaimed),
                               "cut_replica_runs_after_release": int(since)})


def summarize_lease_cut(s: Scenario, _groups: Groups, seen: Deliveries,
                         figures: dict[str, Any]) -> None:
    expiry: dict[str, float] = s.figures.get("lease_expiry", {})
    cut_at = float(s.figures.get("cut_at", 0.0))
    within = beyond = 0
    for run_id, expires in expiry.items():
        arrivals = seen.arrivals.get(run_id, [])
        after = [t for t in arrivals if t > expires]
        beyond += max(0, len(after) - 1)  # one is the re-claimer's
        within += sum(1 for t in arrivals if t <= expires)
    figures["fault_figures"].update({
        "in_flight_sends_before_expiry": within,
        "sends_beyond_in_flight_at_cut": beyond,
        "last_lease_expiry_after_cut_seconds":
            round(max(expiry.values()) - cut_at, 2) if expiry else 0.0,
    })


def lease_cut_tested_nothing(figures: dict[str, Any]) -> str | None:
    """Nothing re-claimed after the cut: no lease ran out under the cut, so no send after
    expiry could have happened (a small run's victim often holds nothing when cut)."""
    own = figures["fault_figures"]
    if own.get("reclaimed_after_expiry"):
        return None
    return (f"nothing re-claimed after the cut (the fault tested nothing; "
            f"{own.get('leases_cut_off', 0)} leases cut off)")


def lease_cut_verdict(figures: dict[str, Any]) -> list[str]:
    broken = common_verdict(figures)
    own = figures["fault_figures"]
    if own.get("sends_beyond_in_flight_at_cut"):
        broken.append(f"sends_beyond_in_flight_at_cut={own['sends_beyond_in_flight_at_cut']}")
    if figures["replica_exits"]:
        broken.append(f"replica_exits={figures['replica_exits']}")
    # Recovery needs firing time after the release to show (the full-size run has it).
    if (own.get("firing_seconds_after_release", 0) >= RECOVERY_WINDOW_SECONDS
            and not own.get("cut_replica_runs_after_release")):
        broken.append("the cut-off replica delivered nothing after the release")
    return broken
