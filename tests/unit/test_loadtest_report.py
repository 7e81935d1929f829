"""Load-test accounting: counted from the receiver's records, compared with baselines."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from cronwire.loadtest.baselines import combined_bound
from cronwire.loadtest.report import Baselines, _plural, build_report

INSTANT = datetime(2026, 1, 1, tzinfo=UTC)


def _records(path: Path, acks: list[tuple[str, float]]) -> Path:
    path.write_text("".join(json.dumps({"id": i, "scheduled_for": "", "at": INSTANT.timestamp() + at}) + "\n"
                            for i, at in acks))
    return path


def test_duplicates_lost_and_rate_from_the_receivers_side(tmp_path: Path) -> None:
    planned = {"a": INSTANT, "b": INSTANT, "c": INSTANT}
    records = _records(tmp_path / "d.jsonl", [("a", 0.5), ("b", 1.0), ("a", 1.5), ("x", 0.1)])
    summary = build_report("postgres", "burst", 3, 1, planned, records, 1.2).summary
    assert (summary["delivered"], summary["duplicates"], summary["lost"]) == (2, 1, 1)
    assert summary["runs_per_second"] == 2.0  # 2 delivered in the 1 s to the last ack
    assert "ratio_to_ceiling" not in summary


def test_compare_adds_the_baselines_and_ratios(tmp_path: Path) -> None:
    records = _records(tmp_path / "d.jsonl", [("a", 0.25), ("b", 0.5)])
    baselines = Baselines(bound_db=40.0, bound_http=10.0, ceiling=combined_bound(40, 10),
                          pgqueuer=2.0)
    summary = build_report("postgres", "burst", 2, 1, {"a": INSTANT, "b": INSTANT},
                           records, 0.5, baselines).summary
    assert summary["ceiling_runs_per_second"] == 8.0  # 1 / (1/40 + 1/10)
    assert (summary["pgqueuer_runs_per_second"], summary["runs_per_second"]) == (2.0, 4.0)
    assert (summary["ratio_to_ceiling"], summary["ratio_to_pgqueuer"]) == (0.5, 2.0)


def test_chart_titles_count_in_the_singular_for_one() -> None:
    assert (_plural(1, "replica"), _plural(3, "replica")) == ("1 replica", "3 replicas")
    assert _plural(100_000, "schedule") == "100,000 schedules"
