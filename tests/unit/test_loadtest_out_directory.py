"""What a load test leaves in --out without --keep-data: its reports, and whatever was
there that it did not make. --compare's sinks (one per configuration of pgqueuer it tries,
about 3-6 MB of nginx logs each at 100,000 jobs) were left behind once the comparison
tried several configurations."""

from __future__ import annotations

from pathlib import Path

from cronwire.loadtest.baselines import PGQ_CONFIGS
from cronwire.loadtest.run import _keep_only_reports


def test_only_the_reports_and_what_was_not_ours_remain(tmp_path: Path) -> None:
    for config in PGQ_CONFIGS:
        (tmp_path / config.sink_name).mkdir(exist_ok=True)
        (tmp_path / config.sink_name / "access.log").write_text("200\n")
        (tmp_path / f"{config.sink_name}.jsonl").write_text("{}\n")  # the python sink's
    for made in ("postgres", "replicas", "baselines", "deliveries"):
        (tmp_path / made).mkdir()
    for kept in ("report.json", "report.png", "notes.txt"):
        (tmp_path / kept).write_text("x")
    _keep_only_reports(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt", "report.json",
                                                           "report.png"]


def test_each_configuration_has_a_sink_of_its_own_name() -> None:
    assert all(config.sink_name.startswith("pgqueuer-") for config in PGQ_CONFIGS)
    # the number of processes shares a sink name; driver and batch do not
    assert len({(c.driver, c.batch) for c in PGQ_CONFIGS}) == len(
        {c.sink_name for c in PGQ_CONFIGS})
