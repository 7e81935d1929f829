"""Each claim hands its candidates to cronwire_claim_tail as ``c::cronwire_claim_candidate``,
a cast by position: a claim whose candidate columns came in another order would pass one
column's values as another's (two uuids, say) without an error. So each claim's
candidates must be the type's columns, by name and type, in the type's order."""

from __future__ import annotations

import asyncpg
import pytest

from cronwire.adapters.postgres.sql import queries

Q = queries("job_run")
TAIL = "\n-- The lease-taking tail every claim shares"


@pytest.mark.parametrize("claim", ["job_run_claim", "job_run_claim_keys", "job_run_sweep"])
async def test_each_claims_candidates_are_the_tails_candidate_type(
        db_pool: asyncpg.Pool, claim: str) -> None:
    statement = Q[claim]
    assert TAIL in statement
    # The claim up to its call of the tail, reading its candidates instead (the owner,
    # limit and lease parameters typed here: the candidates alone may not use them).
    candidates = (statement[:statement.index(TAIL)] + "\nSELECT c.* FROM candidates c, "
                  "(SELECT $1::text, $2::bigint, $3::float8) AS typed")
    async with db_pool.acquire() as conn:
        prepared = await conn.prepare(candidates)
        columns = [(a.name, a.type.name) for a in prepared.get_attributes()]
        expected = [(r["attname"], r["typname"]) for r in await conn.fetch(
            "SELECT a.attname, t.typname FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid"
            " WHERE a.attrelid = (SELECT typrelid FROM pg_type"
            "                      WHERE oid = 'cronwire_claim_candidate'::regtype)"
            "   AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum")]
    assert len(expected) == 13
    assert columns == expected
