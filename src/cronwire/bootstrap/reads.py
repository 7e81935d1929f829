"""Where the API's reads go: the run history and the schedule stats read from a hot
standby (SCHEDULER_DATABASE_READ_URL) while it is fresh enough, else from the primary
(ADR 0039). Wired by the container."""

from __future__ import annotations

from collections.abc import AsyncIterator

import asyncpg

from cronwire.adapters.metrics import PrometheusMetrics
from cronwire.adapters.postgres.pool import create_pool
from cronwire.adapters.postgres.run_history import PostgresRunHistory
from cronwire.adapters.postgres.schedule_stats import PostgresStatsReader
from cronwire.adapters.postgres.standby_freshness import StandbyFreshness
from cronwire.adapters.postgres.standby_history import StandbyRunHistory, StandbyStatsReader
from cronwire.config import Settings
from cronwire.ports import CpuWork


async def read_pool_resource(settings: Settings) -> AsyncIterator[asyncpg.Pool | None]:
    """The history's pool on SCHEDULER_DATABASE_READ_URL; None without one, or where no
    API runs. It connects on its first read, so a standby that is down delays nothing.
    Only the API reads through it, so it is the API's size (SCHEDULER_API_DB_POOL_SIZE)."""
    if settings.database_read_url is None or "api" not in settings.roles:
        yield None
        return
    pool = await create_pool(settings.database_read_url, settings.api_db_pool_size,
                             read_only=True)
    try:
        yield pool
    finally:
        await pool.close()


def freshness(primary_pool: asyncpg.Pool, read_pool: asyncpg.Pool | None,
               max_lag_seconds: float) -> StandbyFreshness | None:
    """One view of the standby's lag, shared by the history and the stats (ADR 0039)."""
    if read_pool is None:
        return None
    return StandbyFreshness(primary_pool, read_pool, max_lag_seconds)


def run_history(primary_pool: asyncpg.Pool, read_pool: asyncpg.Pool | None,
                 freshness: StandbyFreshness | None,
                 metrics: PrometheusMetrics) -> PostgresRunHistory | StandbyRunHistory:
    """The history on the primary, or on a standby while it is fresh enough."""
    primary = PostgresRunHistory(primary_pool)
    if read_pool is None or freshness is None:
        return primary
    return StandbyRunHistory(primary, PostgresRunHistory(read_pool), freshness,
                             on_read=metrics.history_read)


def stats_reader(primary_pool: asyncpg.Pool, read_pool: asyncpg.Pool | None,
                  freshness: StandbyFreshness | None, metrics: PrometheusMetrics,
                  cpu: CpuWork) -> PostgresStatsReader | StandbyStatsReader:
    """The stats on the primary, or on a standby while it is fresh enough; their
    histograms are computed in ``cpu`` (the replica's lane)."""
    primary = PostgresStatsReader(primary_pool, cpu=cpu)
    if read_pool is None or freshness is None:
        return primary
    return StandbyStatsReader(primary, PostgresStatsReader(read_pool, cpu=cpu), freshness,
                              on_read=metrics.history_read)
