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
