"""CLI output for people: instants to the second, '-' for nothing, nested fields dotted,
no password in a database's name."""

from __future__ import annotations

from pathlib import Path

from cronwire.cli.database import database_label
from cronwire.cli.output import Column, cell, field, flatten, readable_ms, render_table
from cronwire.config import Settings


def test_cells_read_as_text() -> None:
    assert cell("2027-03-28T01:00:00.123456Z") == "2027-03-28 01:00:00Z"
    assert cell("2027-03-28T03:00:00+02:00") == "2027-03-28 03:00:00+02:00"
    assert cell(None) == "-" and cell("") == "-" and cell(True) == "yes"
    assert cell({"x-a": "1"}) == "x-a: 1" and cell({}) == "-"
    assert cell("two\nlines") == "two lines"


def test_nested_objects_flatten_to_dotted_keys() -> None:
    schedule = {"id": "s", "target": {"url": "u", "headers": {"k": "v"}},
                "attempts": [{"attempt": 1}]}
    assert flatten(schedule) == [("id", "s"), ("target.url", "u"), ("target.headers", {"k": "v"})]


def test_a_list_of_words_is_one_field_and_a_list_of_objects_its_own_table() -> None:
    """`alerts get` once hid its events without --json."""
    alerts = {"url": "u", "events": ["schedule.failing", "schedule.late"],
              "items": [{"id": 1}]}
    assert flatten(alerts) == [("url", "u"), ("events", "schedule.failing, schedule.late")]


def test_durations_read_as_the_console_writes_them() -> None:
    assert [readable_ms(v) for v in (None, 12.4, 999, 4_570, 12_340, 4_570_000)] == [
        "—", "12 ms", "999 ms", "4.57 s", "12.3 s", "76.2 min"]


def test_tables_align_and_cut_long_cells() -> None:
    rows = [{"id": "a", "error": "x" * 100}, {"id": "bbb", "error": None}]
    text = render_table(rows, [Column("ID", field("id")), Column("ERROR", field("error"))])
    lines = text.splitlines()
    assert lines[0] == "ID   ERROR" and lines[2] == "bbb  -"
    assert lines[1].endswith("…") and len(lines[1]) == len("a    ") + 60


def test_a_database_is_named_without_its_password(tmp_path: Path) -> None:
    shown = database_label(Settings(database_url="postgresql://app:s3cret@db:5433/cw?sslmode=x"))
    assert shown == "database postgresql://app:***@db:5433/cw"
    pair = database_label(Settings(database_url="postgresql://app:s3cret@p1:5432,p2:5433/cw"))
    assert pair == "database postgresql://app:***@p1:5432,p2:5433/cw"  # urlsplit refused this
    embedded = database_label(Settings(home=tmp_path))
    assert embedded == f"the embedded database in {tmp_path.resolve() / 'postgres'}"
