"""The named queries: one file per table, names unique across files, the retry
constants the claim repeats in SQL equal to the domain's, every claim taking its leases
through the one tail function, and the loose index scans over tenants written once."""

from __future__ import annotations

import re

from cronwire.adapters.postgres.migrator import MIGRATIONS_DIR
from cronwire.adapters.postgres.sql import QUERY_DIR, parse_queries, queries, rows_affected
from cronwire.domain.model import MAX_ATTEMPTS, RetryPolicy, RunStatus


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


CLAIMS = ("job_run_claim", "job_run_claim_keys", "job_run_sweep")


def _claim_tail() -> str:
    """The latest definition of ``cronwire_claim_tail``: the migration that last created or
    replaced it, from its CREATE on (a change of the tail is a later migration)."""
    header = re.compile(r"CREATE (?:OR REPLACE )?FUNCTION cronwire_claim_tail\(")
    defining = [path.read_text(encoding="utf-8") for path in sorted(MIGRATIONS_DIR.glob("*.sql"))
                if header.search(path.read_text(encoding="utf-8"))]
    assert defining, "no migration defines cronwire_claim_tail"
    text = defining[-1]
    start = header.search(text)
    assert start is not None
    return text[start.start():]


def test_the_claims_retry_defaults_are_the_domains() -> None:
    claim = _claim_tail()
    default, ceiling = RetryPolicy().max_attempts, MAX_ATTEMPTS
    assert (f"LEAST(GREATEST(COALESCE((s.retry ->> 'max_attempts')::integer, {default}), 1), "
            f"{ceiling})") in claim
    assert f"LEAST(j.attempt_count + 1, {ceiling})" in claim


def test_every_claim_takes_its_leases_through_the_one_tail() -> None:
    # The three claims differ only in their candidate rows; the overlap gate, flow control,
    # the expired-lease reclaim, the exhaustion rule and the lease are the tail function's,
    # written once (ADR 0065), and no claim writes any of them again.
    tail = _claim_tail()
    assert "UPDATE job_run j" in tail and "RETURNING" in tail
    assert "cronwire_overlap_gate(" in tail and "decided AS (" in tail
    assert "cronwire_flow_admit(" in tail and "flow_counted AS (" in tail
    named = queries("job_run")
    for claim in CLAIMS:
        statement = named[claim]
        assert statement.count("cronwire_claim_tail(") == 1, claim
        for own in ("UPDATE job_run", "decided AS (", "cronwire_overlap_gate(",
                    "cronwire_flow_admit(", "flow_counted AS ("):
            assert own not in statement, f"{claim} writes {own!r} itself"


def test_every_claim_takes_its_clock_as_an_optional_parameter() -> None:
    # No claim reads the clock but through its now parameter (NULL: the server's now()),
    # so a test can pin it; the tail takes the same instant.
    named = queries("job_run")
    parameter = {"job_run_claim": "$5", "job_run_claim_keys": "$6", "job_run_sweep": "$5"}
    for claim, now in parameter.items():
        code = "\n".join(line.partition("--")[0] for line in named[claim].splitlines())
        assert code.count("now()") == code.count(f"COALESCE({now}") > 0, claim
        assert f"cronwire_claim_tail($1, $2, $3, a.rows, {now})" in code, claim
    body = "\n".join(line.partition("--")[0] for line in _claim_tail().splitlines())
    assert body.count("now()") == 1 and "COALESCE(p_now, now())" in body


def test_the_loose_index_scans_over_tenants_are_written_once() -> None:
    # The views of migration 0010; no statement spells a recursive scan out again.
    for path in QUERY_DIR.glob("*.sql"):
        assert "RECURSIVE" not in path.read_text(encoding="utf-8").upper(), path.name
    named = queries("job_run")
    assert "FROM job_run_runnable_tenants" in named["job_run_claim"]
    for outbox in ("job_run_outbox_take", "job_run_outbox_next_due"):
        assert "FROM job_run_unpublished_tenants" in named[outbox], outbox


def test_rows_affected_reads_the_command_tag() -> None:
    assert rows_affected("INSERT 0 500") == 500
    assert rows_affected("UPDATE 12") == 12
    assert rows_affected("DELETE 0") == 0


def _schedule_row_columns(sql: str) -> list[str] | None:
    """The columns a statement returns when it returns whole schedule rows (its list starts
    with id, tenant_id, name, cron), without the clock some of them add; else None."""
    match = re.search(r"(?:SELECT|RETURNING)\s+(id, tenant_id, name, cron,.*?)(?:\bFROM\b|$)",
                      sql, re.S)
    if match is None:
        return None
    columns = [c.strip() for c in match.group(1).split(",")]
    return [c for c in columns if c and c != "now() AS db_now"]


def test_every_statement_returning_schedule_rows_returns_the_same_columns() -> None:
    """One mapping reads the rows of all of them: a column added to one list and not the
    others would read as missing (or fail) only on the path that uses that statement."""
    lists = {name: columns for name, sql in queries().items()
             if name.startswith("schedule_") and (columns := _schedule_row_columns(sql))}
    assert {"schedule_get", "schedule_lock", "schedule_list", "schedule_share",
            "schedule_insert", "schedule_update"} <= lists.keys()
    first = lists["schedule_get"]
    assert {name: columns for name, columns in lists.items() if columns != first} == {}


def test_every_statement_fits_the_pools_statement_cache() -> None:
    """A statement longer than the pool's cacheable size is parsed and planned on every call
    (the claim once cost ~6 ms a call that way)."""
    from cronwire.adapters.postgres.pool import MAX_CACHEABLE_STATEMENT_BYTES

    too_long = {name: len(sql.encode()) for name, sql in queries().items()
                if len(sql.encode()) > MAX_CACHEABLE_STATEMENT_BYTES}
    assert too_long == {}


def test_the_tenant_history_reads_every_status() -> None:
    # The unfiltered tenant history is a merge of one scan per status (docs/benchmarks.md#levers): a status
    # missing from its list would vanish from every tenant's history without an error.
    listed = re.search(r"unnest\('\{([a-z,]+)\}'::text\[\]\)",
                       queries()["job_run_list_for_tenant"])
    assert listed is not None
    assert sorted(listed.group(1).split(",")) == sorted(s.value for s in RunStatus)
