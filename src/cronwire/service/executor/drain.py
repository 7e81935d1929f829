"""How the executor lets go of its deliveries: drained at shutdown, abandoned after a
crash of one of its loops. Every lease given back is predicated on still holding it."""

from __future__ import annotations

import asyncio
import logging

from cronwire.domain.errors import StorageError
from cronwire.ports import RunStore
from cronwire.service.executor.deliveries import Deliveries
from cronwire.service.executor.lease_keeper import LeaseKeeper
from cronwire.service.signals import ExecutorSignals

log = logging.getLogger("cronwire.service.executor")


async def abandon(deliveries: Deliveries, grace: float) -> None:
    """Cancel every request in flight and wait (up to ``grace``) for them to end. Their
    leases are not given back: they expire and any replica re-claims the runs."""
    tasks = [lease.task for lease in deliveries.in_flight() if lease.task is not None]
    for task in tasks:
        task.cancel()
    if tasks:
        await asyncio.wait(tasks, timeout=grace)


async def drain(
    deliveries: Deliveries, *, grace: float, runs: RunStore, owner: str,
    keeper: LeaseKeeper, signals: ExecutorSignals,
) -> None:
    """Let in-flight deliveries finish within the grace period (minus the time the
    release and the last write need), then cancel the rest and release their leases,
    predicated on still holding them."""
    budget = max(0.0, grace - min(2.0, grace * 0.25))
    tasks = [lease.task for lease in deliveries.in_flight() if lease.task is not None]
    if tasks:
        await asyncio.wait(tasks, timeout=budget)
    leftover = [lease for lease in deliveries.in_flight() if not lease.lost]
    for lease in leftover:
        if lease.task is not None:
            lease.task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    if not leftover:
        return
    try:
        released = await runs.release(owner, [lease.key for lease in leftover])
    except StorageError:
        log.warning("releasing %d runs failed; their leases will expire", len(leftover),
                    exc_info=True)
        return
    for lease in leftover:
        keeper.drop(lease)
    log.info("released %d of %d unfinished runs", released, len(leftover))
    signals.released.add(lease.run_id for lease in leftover)
