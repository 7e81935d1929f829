"""``--statements``: where the load test's Postgres time went, statement by statement.

The embedded Postgres the load test starts loads ``pg_stat_statements``; its counters are
reset at the first instant and read at the end of the drain, so they cover the window the
CPU figures cover. Each production statement is named by its ``-- name:`` in the query
files; the time is statement time (execution, waits included), per delivered run."""

from __future__ import annotations

from cronwire.bootstrap.embedded import DURABLE_SETTINGS
from cronwire.bootstrap.factories import Pool, production_query_names, statement_key

SETTINGS: dict[str, str] = {
    **DURABLE_SETTINGS,
    "shared_preload_libraries": "pg_stat_statements",
    "pg_stat_statements.track": "top",
}
SHOWN = 10  # the heaviest statements logged
LABEL_CHARACTERS = 60  # of a statement that is not one of ours (the harness's own)


async def start_counting(pool: Pool) -> None:
    """From now on (the first instant): the extension in the load test's database, the
    counters emptied of the seeding and planning before it."""
    await pool.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
    await pool.execute("SELECT pg_stat_statements_reset()")


async def heaviest(pool: Pool, delivered: int) -> list[str]:
    """One line per statement, the heaviest first: its name, calls, rows and statement
    time per delivered run."""
    rows = await pool.fetch(
        "SELECT query, calls, rows, total_exec_time FROM pg_stat_statements "
        "WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) "
        "ORDER BY total_exec_time DESC LIMIT $1", SHOWN)
    names = production_query_names()
    lines = []
    for row in rows:
        label = names.get(statement_key(row["query"])) or " ".join(
            row["query"].split())[:LABEL_CHARACTERS]
        per_run = row["total_exec_time"] * 1000 / max(1, delivered)
        lines.append(f"{label}: {per_run:,.1f} µs per delivered run "
                     f"({row['calls']:,} calls, {row['rows']:,} rows)")
    return lines
