"""The WAL a load test's drain writes: the server's insert position and pg_stat_wal's
counts read at the first instant and again after the drain, on the Postgres the load test
started (on a shared server other work writes WAL too). Per delivered run it says what
Postgres's CPU per run is made of: every row version and index entry is a record."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from cronwire.bootstrap.factories import Pool, harness_queries

Q = harness_queries(Path(__file__).with_name("loadtest.sql"))


@dataclass(frozen=True)
class WalMark:
    lsn: str
    records: int
    full_page_images: int


@dataclass(frozen=True)
class WalWritten:
    records: int
    full_page_images: int
    bytes: float


async def wal_mark(pool: Pool) -> WalMark:
    row = await pool.fetchrow(Q["loadtest_wal"])
    return WalMark(row["lsn"], int(row["wal_records"]), int(row["wal_fpi"]))


async def wal_since(pool: Pool, mark: WalMark) -> WalWritten:
    row = await pool.fetchrow(Q["loadtest_wal_since"], mark.lsn)
    return WalWritten(int(row["wal_records"]) - mark.records,
                      int(row["wal_fpi"]) - mark.full_page_images, float(row["bytes"]))


def wal_note(wal: WalWritten, delivered: int) -> str | None:
    """The log line for ``wal`` over ``delivered`` runs (None when nothing was delivered)."""
    if delivered <= 0:
        return None
    return (f"Postgres WAL: {wal.records / delivered:,.1f} records and "
            f"{wal.bytes / delivered:,.0f} bytes per delivered run "
            f"({wal.full_page_images:,} full-page images in all), same window")
