"""``cronwire loadtest --statements`` names what ``pg_stat_statements`` measured by the
statements' ``-- name:``: the text Postgres 18 records (leading comments dropped, constants
made parameters, parameters renumbered, lists of constants folded) must still lead back to
the statement, for the ones a burst spends its time on."""

from __future__ import annotations

from pathlib import Path

import asyncpg

from cronwire.adapters.postgres.sql import queries
from cronwire.bootstrap.embedded import EmbeddedPostgres
from cronwire.bootstrap.factories import fresh_database
from cronwire.loadtest import statements
from cronwire.loadtest.statements import production_query_names, statement_key

Q = queries()
# The statements of a burst, each with arguments that match nothing (nothing is written).
HOT: dict[str, tuple[object, ...]] = {
    "job_run_claim": ("owner", 10, 30.0, 1.0, None),
    "job_run_claim_keys": ("owner", 10, 30.0, [], [], None),
    "job_run_sweep": ("owner", 10, 30.0, 5.0, None),
    "job_run_resolve": ("owner", *([[]] * 15)),
    "job_run_outbox_take": (10, 1e9, 10),
}


async def test_the_heaviest_statements_of_a_burst_are_named(server_dir: Path) -> None:
    server = EmbeddedPostgres(server_dir / "pg", settings=statements.SETTINGS)
    admin = server.start()
    try:
        conn = await asyncpg.connect(await fresh_database(admin, "statement_names"))
        try:
            await conn.execute("CREATE EXTENSION pg_stat_statements")
            for name, args in HOT.items():
                await conn.fetch(Q[name], *args)
            recorded = [row["query"] for row in await conn.fetch(
                "SELECT query FROM pg_stat_statements WHERE query LIKE 'WITH%'")]
        finally:
            await conn.close()
    finally:
        server.stop()
    names = production_query_names()
    assert {names.get(statement_key(text)) for text in recorded} >= set(HOT), recorded
