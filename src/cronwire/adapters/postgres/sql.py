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

