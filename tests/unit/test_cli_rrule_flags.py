"""`schedules create|update --rrule`: the flag becomes the API's rrule field (lines from
newlines, a literal backslash-n or ' | '), and exactly one timetable flag is given."""

from __future__ import annotations

import argparse

import pytest

from cronwire.cli.scheduling import add_semantics_flags, semantics_fields, timetable
from cronwire.domain.errors import ConfigError


def parsed(argv: list[str], *, creating: bool) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cron")
    add_semantics_flags(parser, creating=creating)
    return parser.parse_args(argv)


def test_create_sends_the_rule_with_its_lines() -> None:
    args = parsed(["--rrule", "DTSTART:20270101T090000 | RRULE:FREQ=DAILY"], creating=True)
    assert semantics_fields(args, creating=True) == {
        "rrule": "DTSTART:20270101T090000\nRRULE:FREQ=DAILY"}
    args = parsed(["--rrule", "DTSTART:20270101T090000\\nRRULE:FREQ=DAILY"], creating=True)
    assert semantics_fields(args, creating=True)["rrule"].splitlines() == [
        "DTSTART:20270101T090000", "RRULE:FREQ=DAILY"]


def test_update_with_a_rule_clears_cron_and_at() -> None:
    args = parsed(["--rrule", "RRULE:FREQ=WEEKLY"], creating=False)
    assert semantics_fields(args, creating=False) == {
        "rrule": "RRULE:FREQ=WEEKLY", "cron": None, "at": None}
    args = parsed(["--cron", "0 4 * * *"], creating=False)
    assert semantics_fields(args, creating=False) == {"rrule": None, "at": None}


@pytest.mark.parametrize("argv", [["--cron", "0 4 * * *", "--rrule", "RRULE:FREQ=DAILY"],
                                  ["--rrule", "RRULE:FREQ=DAILY", "--at", "2030-01-01T00:00Z"],
                                  []])
def test_exactly_one_timetable_flag_on_create(argv: list[str]) -> None:
    with pytest.raises(ConfigError, match="exactly one"):
        semantics_fields(parsed(argv, creating=True), creating=True)


def test_the_table_shows_a_rules_rrule_line() -> None:
    assert timetable({"cron": None, "rrule": "DTSTART:20270101T000000\nRRULE:FREQ=DAILY",
                      "at": None}) == "RRULE:FREQ=DAILY"
    assert timetable({"cron": "0 0 L * *"}) == "0 0 L * *"
