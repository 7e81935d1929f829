"""The WAL a load test's drain writes: the server's insert position at the first instant
and again after the drain, on the Postgres the load test started (on a shared server other
work writes WAL too), and the records between the two read from the WAL itself
(pg_walinspect). Per delivered run it says what Postgres's CPU per run is made of: every
row version and index entry is a record.

Not pg_stat_wal: its counts are what backends have reported, each at most once a second
while busy and ten seconds after going idle, so a drain that ends with its writers idle
misses their last second (kafka mode once read 0.3 records per run). The load test's
server runs with the settings ``serve`` uses (fsync, ``synchronous_commit`` and
``full_page_writes`` on), so the bytes include the full-page images written after a
checkpoint that falls inside the window; the records count each such image once, inside
its record."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from pathlib import Path

import asyncpg

from cronwire.bootstrap.factories import Pool, harness_queries

Q = harness_queries(Path(__file__).with_name("loadtest.sql"))
# Commits flush their own WAL; what no commit flushed (the harness's last writes, an open
# transaction's records) waits for the WAL writer, which flushes within 0.2 s.
FLUSH_WAIT_SECONDS = 5.0


@dataclass(frozen=True)
class WalMark:
    lsn: str


@dataclass(frozen=True)
class WalWritten:
    records: int | None  # None: the WAL could not be read back (pg_walinspect missing)
    bytes: float


async def wal_mark(pool: Pool) -> WalMark:
    row = await pool.fetchrow(Q["loadtest_wal_position"])
    return WalMark(row["lsn"])


async def wal_since(pool: Pool, mark: WalMark) -> WalWritten:
    """What was written from ``mark`` to now; waits (bounded) until it is flushed, since
    only flushed WAL can be read back."""
    end = (await pool.fetchrow(Q["loadtest_wal_position"]))["lsn"]
    deadline = time.monotonic() + FLUSH_WAIT_SECONDS
    while not await pool.fetchval(Q["loadtest_wal_flushed_to"], end):
        if time.monotonic() > deadline:
            break
        await asyncio.sleep(0.05)
    try:
        await pool.execute(Q["loadtest_wal_extension"])
        row = await pool.fetchrow(Q["loadtest_wal_between"], mark.lsn, end)
    except asyncpg.PostgresError:
        # No pg_walinspect, or the segment of ``mark`` already recycled: bytes stay exact.
        return WalWritten(None, float(await pool.fetchval(Q["loadtest_wal_bytes"], mark.lsn, end)))
    return WalWritten(int(row["records"]), float(row["bytes"]))


def wal_note(wal: WalWritten, delivered: int) -> str | None:
    """The log line for ``wal`` over ``delivered`` runs (None when nothing was delivered)."""
    if delivered <= 0:
        return None
    records = ("records not counted (pg_walinspect could not read the window)"
               if wal.records is None else f"{wal.records / delivered:,.1f} records")
    return (f"Postgres WAL: {records} and {wal.bytes / delivered:,.0f} bytes per delivered "
            "run, same window")
