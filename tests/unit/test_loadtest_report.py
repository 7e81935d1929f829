"""Load-test accounting: counted from the receiver's records, compared with baselines."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from cronwire.loadtest.baselines import PgqConfig, PgqMeasure, combined_bound
from cronwire.loadtest.report import Baselines, Costs, _plural, build_report
from cronwire.loadtest.sinks import records_acknowledgements
from cronwire.loadtest.wal import WalWritten, wal_note

INSTANT = datetime(2026, 1, 1, tzinfo=UTC)


def _acks(acks: list[tuple[str, float]]) -> list[tuple[str, float]]:
    return [(webhook_id, INSTANT.timestamp() + at) for webhook_id, at in acks]


def test_duplicates_lost_and_rate_from_the_receivers_side() -> None:
    planned = {"a": INSTANT, "b": INSTANT, "c": INSTANT}
    acks = _acks([("a", 0.5), ("b", 1.0), ("a", 1.5), ("x", 0.1)])
    summary = build_report("postgres", "burst", 3, 1, planned, acks, 1.2).summary
    assert (summary["delivered"], summary["duplicates"], summary["lost"]) == (2, 1, 1)
    assert summary["runs_per_second"] == 2.0  # 2 delivered in the 1 s to the last ack
    assert "ratio_to_ceiling" not in summary and "sink" not in summary


def test_the_python_sinks_records_are_its_acknowledgements(tmp_path: Path) -> None:
    records = tmp_path / "d.jsonl"
    records.write_text("".join(json.dumps({"id": i, "scheduled_for": "", "at": at}) + "\n"
                               for i, at in _acks([("a", 0.5), ("a", 1.5)])))
    assert list(records_acknowledgements(records)) == _acks([("a", 0.5), ("a", 1.5)])
    assert list(records_acknowledgements(tmp_path / "none.jsonl")) == []


def test_compare_adds_the_bound_the_references_the_ratios_and_cpu_per_run() -> None:
    baselines = Baselines(bound_db=40.0, bound_http=10.0, ceiling=combined_bound(40, 10),
                          pgqueuer=2.0, aiohttp_http=5.0)
    costs = Costs(replica_seconds=0.0002, sink_seconds=0.00001, sink="nginx")
    summary = build_report("postgres", "burst", 2, 1, {"a": INSTANT, "b": INSTANT},
                           _acks([("a", 0.25), ("b", 0.5)]), 0.5, baselines, costs).summary
    assert summary["ceiling_runs_per_second"] == 8.0  # 1 / (1/40 + 1/10)
    assert (summary["pgqueuer_runs_per_second"], summary["runs_per_second"]) == (2.0, 4.0)
    assert (summary["ratio_to_ceiling"], summary["ratio_to_pgqueuer"]) == (0.5, 2.0)
    assert summary["ratio_to_bound"] == 0.5
    assert (summary["bound_db_per_second"], summary["bound_http_per_second"]) == (40.0, 10.0)
    assert (summary["bound_http_source"], summary["aiohttp_http_per_second"]) == ("wrk+nginx", 5.0)
    assert summary["sink"] == "nginx"
    # 200 µs of replica CPU and 10 µs of the sink's over 2 delivered runs
    assert (summary["replica_cpu_us_per_run"], summary["sink_cpu_us_per_run"]) == (100.0, 5.0)
    assert "bound_http_note" not in summary
    assert summary["pgqueuer_cpu_us_per_job"] == {}  # not measured: said, not made up


def test_pgqueuers_cpu_split_is_reported_beside_cronwires() -> None:
    measure = PgqMeasure(PgqConfig("pool", 100, 1000), 2.0, worker_us=150.04,
                         postgres_us=61.0, sink_us=None)
    baselines = Baselines(bound_db=40.0, bound_http=10.0, ceiling=combined_bound(40, 10),
                          pgqueuer=measure.jobs_per_second,
                          pgqueuer_cpu_us_per_job=measure.split())
    summary = build_report("postgres", "burst", 1, 1, {"a": INSTANT}, _acks([("a", 0.5)]),
                           0.5, baselines).summary
    assert summary["pgqueuer_cpu_us_per_job"] == {"worker": 150.0, "postgres": 61.0}
    assert measure.cpu_note() == "µs of CPU per job: worker 150, postgres 61"
    assert PgqMeasure(PgqConfig("pool", 100, 1000), 2.0).cpu_note() == ""


def test_a_fallback_bound_says_where_its_http_half_came_from() -> None:
    baselines = Baselines(bound_db=40.0, bound_http=5.0, ceiling=combined_bound(40, 5),
                          pgqueuer=2.0, aiohttp_http=5.0, bound_http_source="aiohttp",
                          bound_http_note="wrk or nginx is not installed")
    summary = build_report("postgres", "burst", 1, 1, {"a": INSTANT}, _acks([("a", 0.5)]),
                           0.5, baselines).summary
    assert (summary["bound_http_source"], summary["bound_http_per_second"]) == ("aiohttp", 5.0)
    assert summary["bound_http_note"] == "wrk or nginx is not installed"
    assert summary["replica_cpu_us_per_run"] is None  # not measured: said, not made up


def test_chart_titles_count_in_the_singular_for_one() -> None:
    assert (_plural(1, "replica"), _plural(3, "replica")) == ("1 replica", "3 replicas")
    assert _plural(100_000, "schedule") == "100,000 schedules"


def test_the_wal_line_is_per_delivered_run_and_absent_when_nothing_was_delivered() -> None:
    written = WalWritten(records=161_000, bytes=195_200_000.0)
    assert wal_note(written, 10_000) == (
        "Postgres WAL: 16.1 records and 19,520 bytes per delivered run, same window")
    assert wal_note(written, 0) is None
    unread = wal_note(WalWritten(records=None, bytes=195_200_000.0), 10_000)
    assert unread is not None and "records not counted" in unread and "19,520 bytes" in unread
