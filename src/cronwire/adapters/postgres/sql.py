"""Named SQL queries loaded once from ``queries/*.sql``.

Each file holds blocks introduced by ``-- name: entity_verb`` (River/procrastinate style);
runtime code refers to queries by name and never builds SQL strings.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

QUERY_DIR = Path(__file__).parent / "queries"
_HEADER = re.compile(r"^--\s*name:\s*([a-z_][a-z0-9_]*)\s*$", re.MULTILINE)


def parse_queries(text: str) -> dict[str, str]:
    """Split a file into {name: sql}; the text before the first header is ignored."""
    parts = _HEADER.split(text)
    queries: dict[str, str] = {}
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        sql = body.strip().rstrip(";").strip()
        if name in queries:
            raise ValueError(f"duplicate query name {name!r}")
        if not sql:
            raise ValueError(f"query {name!r} is empty")
        queries[name] = sql
    return queries


@functools.cache
def queries(file_stem: str) -> dict[str, str]:
    """Queries of ``queries/<file_stem>.sql`` (one file per table, as in River)."""
    return parse_queries((QUERY_DIR / f"{file_stem}.sql").read_text(encoding="utf-8"))


# The line where job_run_claim's lease-taking tail begins (everything from there to the end:
# the exhaustion decision and the UPDATE ... RETURNING). Kafka mode's claims reuse it.
_LEASE_TAIL = re.compile(r"^decided AS \(", re.MULTILINE)


@functools.cache
def claim_statement(candidates: str, file_stem: str = "executor") -> str:
    """A claim whose candidate rows come from the fragment ``candidates`` (a ``WITH``
    list ending in a ``candidates AS (...)`` CTE and a comma) and whose lease-taking is
    job_run_claim's own tail, appended verbatim: the expired-lease and attempt-exhaustion
    rules live in one statement text, whichever source feeds the claim."""
    named = queries(file_stem)
    base = named["job_run_claim"]
    tail = _LEASE_TAIL.search(base)
    if tail is None:
        raise ValueError("job_run_claim has no line starting 'decided AS (' to share")
    return f"{named[candidates]}\n{base[tail.start():]}"
