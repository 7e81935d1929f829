"""deploy/prometheus/alerts.yaml: promtool accepts it, its unit tests pass, and every alert
has a severity, a summary, a description and a runbook section in docs/operating.md."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
RULES = REPO / "deploy" / "prometheus" / "alerts.yaml"
RULE_TESTS = REPO / "deploy" / "prometheus" / "alerts.test.yaml"
SEVERITIES = {"critical", "warning", "info"}


def _promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        pytest.skip("promtool not installed (Debian package prometheus; .ci/run installs it)")
    return found


def _alerts() -> list[dict[str, object]]:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return [rule for group in groups for rule in group["rules"] if "alert" in rule]


def test_promtool_checks_the_rules() -> None:
    done = subprocess.run([_promtool(), "check", "rules", str(RULES)], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


def test_promtool_unit_tests_of_the_rules_pass() -> None:
    done = subprocess.run([_promtool(), "test", "rules", RULE_TESTS.name], capture_output=True,
                          text=True, timeout=60, cwd=RULE_TESTS.parent)
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_alert_has_a_unit_test() -> None:
    tested = {case["alertname"] for test in yaml.safe_load(RULE_TESTS.read_text())["tests"]
              for case in test.get("alert_rule_test", [])}
    assert {str(rule["alert"]) for rule in _alerts()} <= tested


def test_every_alert_is_documented_and_has_a_runbook() -> None:
    runbooks = REPO.joinpath("docs", "operating.md").read_text()
    alerts = _alerts()
    assert len(alerts) >= 9
    for rule in alerts:
        name = str(rule["alert"])
        labels = rule["labels"]
        annotations = rule["annotations"]
        assert isinstance(labels, dict) and labels["severity"] in SEVERITIES, name
        assert isinstance(annotations, dict), name
        assert annotations["summary"] and annotations["description"], name
        assert annotations["runbook"] == f"docs/operating.md#{name.lower()}", name
        assert f"\n#### {name}\n" in runbooks, f"docs/operating.md has no runbook section for {name}"
