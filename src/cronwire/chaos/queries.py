"""The chaos harness's own SQL (set-up and observation), beside it in chaos.sql: never
among the production queries, never used by serve."""

from __future__ import annotations

from pathlib import Path

from cronwire.bootstrap.factories import harness_queries

Q = harness_queries(Path(__file__).with_name("chaos.sql"))
