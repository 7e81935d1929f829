"""`cronwire apply`, `plan` and `export` against a live server (ADR 0057): export -> apply
into an empty tenant -> export is identical; plan's exit status; bad files (a YAML bomb,
duplicate keys, unknown fields, a missing ${VAR}) refused in one line naming the file and
line, with nothing written."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.support.cli_shell import InProcess, Live
from tests.support.processes import cronwire_executable

HOOK = "http://127.0.0.1:9/hook"

SCHEDULES = f"""\
- key: billing.nightly
  name: nightly billing
  cron: "0 3 * * *"
  timezone: europe/berlin
  target:
    url: {HOOK}
    headers:
      Authorization: "Bearer ${{BILLING_TOKEN}}"
      x-team: billing
  retry: {{max_attempts: 5, initial_backoff_seconds: 10, max_backoff_seconds: 600}}
  flow_control: {{max_concurrency: 2}}
  alerts: {{after_failures: 3}}
- key: reports.hourly
  name: hourly report
  cron: "15 * * * *"
  target: {{url: {HOOK}, method: PUT, body: '{{"k": 1}}'}}
  paused: true
- key: payroll.second-tuesday
  name: payroll
  rrule: "RRULE:FREQ=MONTHLY;BYDAY=2TU;BYHOUR=9;BYMINUTE=0;BYSECOND=0"
  timezone: europe/berlin
  target: {{url: {HOOK}}}
"""


def _write(directory: Path, name: str, text: str) -> str:
    path = directory / name
    path.write_text(text)
    return str(path)


def _schedules(cli: InProcess, token: str) -> list[dict[str, object]]:
    listed = cli.ok("schedules", "list", "--all", "--limit", "200", token=token)
    return sorted(listed["items"], key=lambda s: str(s["id"]))


def test_export_apply_export_round_trips(cli: InProcess, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    token = cli.ok("tenant", "create", "git-one")["token"]
    monkeypatch.setenv("BILLING_TOKEN", "s3cret")
    files = tmp_path / "schedules"
    files.mkdir()
    _write(files, "all.yaml", SCHEDULES)
    applied = cli.ok("apply", "-f", str(files), "--managed-by", "git:acme", token=token)
    assert sorted(applied["created"]) == ["billing.nightly", "payroll.second-tuesday",
                                          "reports.hourly"]
    code, exported, _ = cli.run("export", token=token)
    assert code == 0 and "s3cret" not in exported
    assert "${CRONWIRE_BILLING_NIGHTLY_AUTHORIZATION}" in exported
    monkeypatch.setenv("CRONWIRE_BILLING_NIGHTLY_AUTHORIZATION", "Bearer s3cret")
    monkeypatch.setenv("CRONWIRE_BILLING_NIGHTLY_X_TEAM", "billing")
    # Applied to the tenant it came from, the export changes nothing at all.
    again = cli.ok("apply", "-f", _write(tmp_path, "export.yaml", exported), token=token)
    assert again["created"] == again["updated"] == again["deleted"] == [], again
    assert again["unchanged"] == 3  # the RFC 5545 rule too (an export once left it out)
    other = cli.ok("tenant", "create", "git-two")["token"]
    cli.ok("apply", "-f", str(tmp_path / "export.yaml"), token=other)
    code, exported_again, _ = cli.run("export", token=other)
    assert exported_again == exported
    assert cli.run("plan", "-f", str(tmp_path / "export.yaml"), token=other)[0] == 0


def test_plan_says_by_its_exit_status_whether_anything_would_change(
        cli: InProcess, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    token = cli.ok("tenant", "create", "git-plan")["token"]
    monkeypatch.setenv("BILLING_TOKEN", "s3cret")
    path = _write(tmp_path, "s.yaml", SCHEDULES)
    code, out, _ = cli.run("plan", "-f", path, "--managed-by", "git", token=token)
    assert code == 3 and len(json.loads(out)["created"]) == 3
    assert _schedules(cli, token) == []  # a plan writes nothing
    cli.ok("apply", "-f", path, "--managed-by", "git", token=token)
    assert cli.run("plan", "-f", path, "--managed-by", "git", token=token)[0] == 0
    changed = _write(tmp_path, "s.yaml", SCHEDULES.replace('"15 * * * *"', '"45 * * * *"'))
    code, out, _ = cli.run("plan", "-f", changed, "--managed-by", "git", token=token)
    assert code == 3
    assert json.loads(out)["updated"] == [
        {"key": "reports.hourly", "changes": {"cron": ["15 * * * *", "45 * * * *"]}}]


BOMB = """\
a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]
b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]
c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]
d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]
e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]
f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e]
g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f]
h: &h [*g, *g, *g, *g, *g, *g, *g, *g, *g]
i: &i [*h, *h, *h, *h, *h, *h, *h, *h, *h]
"""


@pytest.mark.parametrize(("text", "says"), [
    (BOMB, "aliases"),
    (BOMB.replace(", *a, *a, *a, *a, *a, *a, *a, *a", "").replace(
        ", *b, *b, *b, *b, *b, *b, *b, *b", ""), ""),  # a few aliases: then the fields
    ("- key: a\n  name: x\n  name: y\n", ":3: duplicate key 'name' (first on line 2)"),
    (f"- key: a\n  name: x\n  cron: '0 3 * * *'\n  target: {{url: {HOOK}}}\n  crn: x\n",
     ":5: schedules[0].crn"),
    (f"- key: a\n  name: x\n  cron: '0 3 * * *'\n  target:\n    url: {HOOK}\n"
     "    method: FETCH\n", ":6: schedules[0].target.method"),
    (f"- key: a\n  name: x\n  cron: '0 3 * * *'\n  target: {{url: {HOOK}}}\n"
     "  body: ${NOT_SET_ANYWHERE}\n", "${NOT_SET_ANYWHERE} is not set"),
    ("- key: a\n  name: [unclosed\n", ":3: not valid YAML"),
])
def test_bad_files_are_refused_in_one_line_and_nothing_is_written(
        cli: InProcess, tmp_path: Path, text: str, says: str) -> None:
    token = cli.ok("tenant", "create", "git-bad")["token"]
    cli.ok("apply", "-f", _write(tmp_path, "good.yaml", SCHEDULES.replace(
        "${BILLING_TOKEN}", "x")), "--managed-by", "git", token=token)
    before = _schedules(cli, token)
    bad = _write(tmp_path, "bad.yaml", text)
    line = cli.refused("apply", "-f", bad, "--managed-by", "git", "--prune", code=2,
                       token=token)
    assert line.startswith(f"cronwire: {bad}") and says in line, line
    assert _schedules(cli, token) == before


def test_get_key_and_delete_key(cli: InProcess, live: Live, tmp_path: Path) -> None:
    token = cli.ok("tenant", "create", "git-keys")["token"]
    cli.ok("apply", "-f", _write(tmp_path, "one.json", json.dumps(
        {"key": "one", "name": "one", "cron": "0 3 * * *", "target": {"url": HOOK}})),
        token=token)
    assert cli.ok("schedules", "get-key", "one", token=token)["key"] == "one"
    cli.ok("schedules", "delete-key", "one", token=token)
    assert "not found" in cli.refused("schedules", "get-key", "one", code=1, token=token)


def test_two_shells_applying_at_once_one_after_the_other(live: Live, cli: InProcess,
                                                           tmp_path: Path) -> None:
    """Two `cronwire apply` processes at once: one creates the 60 schedules, the other's
    answer shows it came second (each schedule changed from the first one's cron)."""
    token = cli.ok("tenant", "create", "git-race")["token"]
    paths = []
    for minute in (1, 2):
        text = "".join(f"- {{key: s{i}, name: s{i}, cron: '{minute} 3 * * *', "
                       f"target: {{url: '{HOOK}'}}}}\n" for i in range(60))
        paths.append(_write(tmp_path, f"m{minute}.yaml", text))
    env = live.env(token)
    shells = [subprocess.Popen([cronwire_executable(), "apply", "-f", path, "--managed-by",
                                "git", "--json"], env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True) for path in paths]
    answers = []
    for shell in shells:
        out, err = shell.communicate(timeout=120)
        assert shell.returncode == 0, err
        answers.append(json.loads(out))
    first, second = sorted(answers, key=lambda a: len(a["created"]), reverse=True)
    assert len(first["created"]) == 60 and first["updated"] == []
    assert second["created"] == [] and len(second["updated"]) == 60
    last = second["updated"][0]["changes"]["cron"][1]
    assert {s["cron"] for s in _schedules(cli, token)} == {last}
