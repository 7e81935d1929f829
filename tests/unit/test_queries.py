"""The named queries: one file per table, names unique across files, and the retry
constants the claim repeats in SQL equal to the domain's."""

from __future__ import annotations

from cronwire.adapters.postgres.sql import QUERY_DIR, parse_queries, queries, rows_affected
from cronwire.domain.model import MAX_ATTEMPTS, RetryPolicy


def test_every_query_name_is_unique_and_starts_with_its_files_entity() -> None:
    merged = queries()
    for path in QUERY_DIR.glob("*.sql"):
        named = parse_queries(path.read_text(encoding="utf-8"))
        assert named.items() <= merged.items()
        if path.stem in {"database", "chaos"}:  # no table: the server; the fault harness
            continue
        entity = path.stem + "_"
        stray = [n for n in named if not n.startswith(entity)]
        assert not stray, f"{path.name}: {stray}"


def test_the_claims_retry_defaults_are_the_domains() -> None:
    claim = queries()["job_run_claim"]
    default, ceiling = RetryPolicy().max_attempts, MAX_ATTEMPTS
    assert (f"LEAST(GREATEST(COALESCE((s.retry ->> 'max_attempts')::integer, {default}), 1), "
            f"{ceiling})") in claim
    assert f"LEAST(j.attempt_count + 1, {ceiling})" in claim


def test_rows_affected_reads_the_command_tag() -> None:
    assert rows_affected("INSERT 0 500") == 500
    assert rows_affected("UPDATE 12") == 12
    assert rows_affected("DELETE 0") == 0
