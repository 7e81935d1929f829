"""The chaos harness's own SQL (set-up and observation), beside it in chaos.sql: never
among the production queries, never used by serve."""

from __future__ import annotations

from pathlib import Path

from cronwire.adapters.postgres.sql import parse_queries

Q = parse_queries((Path(__file__).parent / "chaos.sql").read_text(encoding="utf-8"))
