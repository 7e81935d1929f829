"""What several fault drivers share: waiting for a replica to hold leases."""

from __future__ import annotations

import asyncio
import time

from cronwire.chaos.scenario import Scenario
from cronwire.harness.fleet import Replica


async def replica_holding_leases(s: Scenario, within: float) -> Replica | None:
    """A random replica that holds leases now (so the fault has requests in flight to
    break), polling for up to ``within`` seconds."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        holding = [r for r in s.replicas if r.running and await s.leases_of(r.name)]
        if holding:
            return s.rng.choice(holding)
        await asyncio.sleep(0.02)
    return None


async def replica_holding_leases_named(s: Scenario, replica: Replica, within: float) -> bool:
    """Wait up to ``within`` seconds for ``replica`` to hold leases; True once it does."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if await s.leases_of(replica.name):
            return True
        await asyncio.sleep(0.02)
    return False
