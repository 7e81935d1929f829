"""Named SQL queries loaded once from ``queries/*.sql``, and the driver's command tags.

One file per table, as River does it (``job_run.sql``, ``schedule.sql``, ``tenant.sql``,
``api_token.sql``, ``target_breaker.sql``, ``job_run_attempt.sql``, ``schema_migration.sql``;
``job_run_partition.sql`` for the catalog of job_run's partitions and ``database.sql`` for
the server's clock and advisory locks). Each file holds blocks introduced by
``-- name: entity_verb``, the entity being the file's table, so a name is unique across
files and runtime code looks queries up by name alone (``queries()["job_run_claim"]``);
it never builds SQL strings. The texts are typed ``LiteralString``: they come from files
shipped with the package, never from input.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import LiteralString, cast

QUERY_DIR = Path(__file__).parent / "queries"
_HEADER = re.compile(r"^--\s*name:\s*([a-z_][a-z0-9_]*)\s*$", re.MULTILINE)


def parse_queries(text: str) -> dict[str, LiteralString]:
    """Split a file into {name: sql}; the text before the first header is ignored."""
    parts = _HEADER.split(text)
    queries: dict[str, LiteralString] = {}
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        sql = body.strip().rstrip(";").strip()
        if name in queries:
            raise ValueError(f"duplicate query name {name!r}")
        if not sql:
            raise ValueError(f"query {name!r} is empty")
        queries[name] = cast(LiteralString, sql)
    return queries


@functools.cache
def queries(file_stem: str | None = None) -> dict[str, LiteralString]:
    """Queries of ``queries/<file_stem>.sql``; without a stem, every file's by name (a
    name defined in two files is refused: it would be ambiguous)."""
    if file_stem is not None:
        return parse_queries((QUERY_DIR / f"{file_stem}.sql").read_text(encoding="utf-8"))
    merged: dict[str, LiteralString] = {}
    for path in sorted(QUERY_DIR.glob("*.sql")):
        for name, sql in queries(path.stem).items():
            if name in merged:
                raise ValueError(f"query name {name!r} defined twice (second in {path.name})")
            merged[name] = sql
    return merged


def rows_affected(command_tag: str) -> int:
    """Rows a statement touched, from its command tag (``UPDATE 12``, ``INSERT 0 500``)."""
    return int(command_tag.rsplit(" ", 1)[-1])


# The line where job_run_claim's lease-taking tail begins (everything from there to the end:
# the overlap gate, the exhaustion decision and the UPDATE ... RETURNING). Kafka mode's
# claims reuse it.
_LEASE_TAIL = re.compile(r"^picked AS \(", re.MULTILINE)


@functools.cache
def claim_statement(candidates: str, file_stem: str = "job_run") -> LiteralString:
    """A claim whose candidate rows come from the fragment ``candidates`` (a ``WITH``
    list ending in a ``candidates AS (...)`` CTE and a comma) and whose lease-taking is
    job_run_claim's own tail, appended verbatim: the expired-lease and attempt-exhaustion
    rules live in one statement text, whichever source feeds the claim."""
    named = queries(file_stem)
    base = named["job_run_claim"]
    tail = _LEASE_TAIL.search(base)
    if tail is None:
        raise ValueError("job_run_claim has no line starting 'picked AS (' to share")
    return f"{named[candidates]}\n{base[tail.start():]}"
