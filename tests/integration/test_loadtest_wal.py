"""The load test's WAL line counts the records the window wrote (kafka mode once read
0.3 records per run). pg_stat_wal, which it read, holds what backends have reported: each
reports at most once a second while busy and ten seconds after going idle, so writes from
a connection that has just gone idle were missing. Here a connection writes 400 rows, one
transaction each, and stays open and idle, as a replica's pool does when a drain ends."""

from __future__ import annotations

import asyncpg

from cronwire.loadtest.wal import wal_mark, wal_since

ROWS = 400


async def test_the_records_of_a_connection_gone_idle_are_counted(database_url: str) -> None:
    pool = await asyncpg.create_pool(database_url, min_size=1, max_size=2)
    writer = await asyncpg.connect(database_url)
    try:
        await writer.execute("CREATE TABLE wal_probe (id int PRIMARY KEY, note text)")
        mark = await wal_mark(pool)
        for i in range(ROWS):  # autocommit: one transaction, one commit record, per row
            await writer.execute("INSERT INTO wal_probe VALUES ($1, 'x')", i)
        written = await wal_since(pool, mark)
        # At least a record a row (servers batch: 415 to 994 were read here for 400 rows);
        # the reading this replaces saw none of them.
        assert written.records is not None and written.records >= ROWS, written
        assert written.bytes > 0
    finally:
        await writer.close()
        await pool.close()
