"""``--statements``: where the load test's Postgres time went, statement by statement.

The embedded Postgres the load test starts loads ``pg_stat_statements``; its counters are
reset at the first instant and read at the end of the drain, so they cover the window the
CPU figures cover. Each production statement is named by its ``-- name:`` in the query
files; the time is statement time (execution, waits included), per delivered run."""

from __future__ import annotations

import re
from pathlib import Path

from cronwire.bootstrap.embedded import DURABLE_SETTINGS
from cronwire.bootstrap.factories import Pool, harness_queries, production_queries

Q = harness_queries(Path(__file__).with_name("loadtest.sql"))

SETTINGS: dict[str, str] = {
    **DURABLE_SETTINGS,
    "shared_preload_libraries": "pg_stat_statements",
    "pg_stat_statements.track": "top",
    # pg_stat_activity keeps 1 KiB of a statement by default; waits.py names a statement
    # by its text, and a long comment before the SQL would leave too little of it.
    "track_activity_query_size": "16384",
}
SHOWN = 10  # the heaviest statements logged
LABEL_CHARACTERS = 60  # of a statement that is not one of ours (the harness's own)


STATEMENT_KEY_LENGTH = 240


def statement_key(sql: str) -> str:
    """A statement's skeleton, equal for a production statement and what
    ``pg_stat_statements`` recorded of it: that keeps the text from the first line that is
    not a comment, with every constant made a parameter, the parameters renumbered and
    lists of constants folded into one, so here comments, parameters, quoted and numeric
    constants, booleans, NULLs, commas, minus signs and whitespace are all left out."""
    text = re.sub(r"--[^\n]*|/\*.*?\*/", "", _from_the_sql(sql), flags=re.DOTALL)
    # EXTRACT's field is a constant to Postgres (EXTRACT($1 FROM ...)).
    text = re.sub(r"EXTRACT\s*\(\s*(?:\$\d+|\w+)\s+FROM", "EXTRACT(FROM", text,
                  flags=re.IGNORECASE)
    text = re.sub(r"\$\d+|'(?:[^']|'')*'|\b\d+(?:\.\d+)?\b|\b(?:true|false|null)\b", "",
                  text, flags=re.IGNORECASE)
    # Postgres 18 folds a list of constants into one ("IN ($1 /*, ... */)"), and a negative
    # constant's minus goes with it: no commas, no minus signs. Only the start is kept, in
    # case some other keyword is a constant to Postgres further in.
    return "".join(text.replace(",", "").replace("-", "").split())[:STATEMENT_KEY_LENGTH]


def _from_the_sql(sql: str) -> str:
    """``sql`` from its first line that is neither blank nor a comment."""
    lines = sql.splitlines()
    while lines and (not lines[0].strip() or lines[0].lstrip().startswith("--")):
        lines.pop(0)
    return "\n".join(lines)


def statement_label(sql: str, names: dict[str, str]) -> str:
    """How the load test names a statement it saw: its ``-- name:`` when it is one of
    ours (``names``: :func:`production_query_names`), else the start of its SQL."""
    return names.get(statement_key(sql)) or " ".join(
        _from_the_sql(sql).split())[:LABEL_CHARACTERS]


def production_query_names() -> dict[str, str]:
    """Each production statement's :func:`statement_key` to its ``-- name:`` (keys two
    statements share are left out): the load test names the statements it measured."""
    names: dict[str, str] = {}
    shared: set[str] = set()
    for name, sql in production_queries().items():
        key = statement_key(sql)
        if key in names:
            shared.add(key)
        names[key] = name
    return {key: name for key, name in names.items() if key not in shared}


async def start_counting(pool: Pool) -> None:
    """From now on (the first instant): the extension in the load test's database, the
    counters emptied of the seeding and planning before it."""
    await pool.execute(Q["loadtest_statements_extension"])
    await pool.execute(Q["loadtest_statements_reset"])


async def heaviest(pool: Pool, delivered: int) -> list[str]:
    """One line per statement, the heaviest first: its name, calls, rows and statement
    time per delivered run."""
    rows = await pool.fetch(Q["loadtest_statements_heaviest"], SHOWN)
    names = production_query_names()
    lines = []
    for row in rows:
        label = statement_label(row["query"], names)
        per_run = row["total_exec_time"] * 1000 / max(1, delivered)
        lines.append(f"{label}: {per_run:,.1f} µs per delivered run "
                     f"({row['calls']:,} calls, {row['rows']:,} rows)")
    return lines
