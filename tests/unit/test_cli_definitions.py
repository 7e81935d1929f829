"""`cronwire apply`'s file reading and change rendering, without a server: line numbers of
fields, placeholders, and the refusals (bombs, duplicates, missing variables)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cronwire.cli.as_code import as_definition, placeholder, render_changes
from cronwire.cli.definitions import load_definitions
from cronwire.domain.errors import ConfigError


def test_a_definition_knows_the_line_of_each_field(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOKEN", "s3cret")
    (tmp_path / "b.yml").write_text("key: b\nname: one\n")
    (tmp_path / "a.yaml").write_text(
        "- key: a\n  target:\n    url: http://h/\n    headers: {auth: 'Bearer ${TOKEN}'}\n"
        "- {\"key\": \"c\", \"name\": \"$${TOKEN} stays\"}\n")
    found = load_definitions([str(tmp_path)])
    assert [d.fields["key"] for d in found] == ["a", "c", "b"]  # files in name order
    assert found[0].line_of("target.url") == 3 and found[0].line_of("target.nope") == 2
    assert found[0].fields["target"]["headers"]["auth"] == "Bearer s3cret"
    assert found[2].line == 1


@pytest.mark.parametrize(("text", "says"), [
    ("key: a\nkey: b\n", "x.yaml:2: duplicate key 'key'"),
    ("a: ${NOPE_NOT_SET}\n", "${NOPE_NOT_SET} is not set"),
    ("[1, 2]\n", "item 1 is not a schedule"),
    ("a: !!python/object:os.system x\n", "x.yaml:1: not valid YAML"),
    ("".join(f"x{i}: &a{i} [*a{i - 1}, *a{i - 1}]\n" if i else "x0: &a0 [1]\n"
             for i in range(120)), "more than 100 aliases"),
    ("".join(f"x{i}: &a{i} [*a{i - 1}, *a{i - 1}]\n" if i else "x0: &a0 [1]\n"
             for i in range(40)), "2,000,000 values"),
])
def test_hostile_files_are_refused_naming_file_and_line(tmp_path: Path, text: str,
                                                         says: str) -> None:
    path = tmp_path / "x.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as refused:
        load_definitions([str(path)])
    assert says in str(refused.value) and str(path) in str(refused.value)


def test_export_never_writes_a_header_value() -> None:
    schedule = {"key": "billing.nightly", "managed_by": None, "name": "n", "cron": "0 3 * * *",
                "at": None, "timezone": "UTC", "status": "paused", "alerts": {},
                "target": {"url": "http://h/", "method": "POST", "body": None,
                           "headers": {"Authorization": "***"}},
                "retry": {"max_attempts": 3}, "flow_control": None}
    written = as_definition(schedule)
    assert written["target"]["headers"] == {
        "Authorization": "${CRONWIRE_BILLING_NIGHTLY_AUTHORIZATION}"}
    assert written["paused"] is True and "managed_by" not in written
    assert placeholder("a-b.c", "x-y") == "${CRONWIRE_A_B_C_X_Y}"


def test_changes_read_field_by_field() -> None:
    text = render_changes({"created": ["n"], "deleted": ["d"], "unchanged": 4, "dry_run": True,
                           "updated": [{"key": "u", "changes": {"cron": ["0 3 * * *",
                                                                         "5 3 * * *"]}}]})
    assert text.splitlines() == [
        "+ n  (create)", "~ u", "    cron: '0 3 * * *' -> '5 3 * * *'", "- d  (delete)",
        "3 would change (1 create, 1 update, 1 delete), 4 unchanged"]
