"""`cronwire --help` reads well: defaults as a user types them, every option explained."""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator

import pytest

from cronwire.cli.main import build_parser
from cronwire.config import describe

PYTHON_REPRS = re.compile(r"frozenset|\bNone\b|\bTrue\b|\bFalse\b|PosixPath|\{'")
# `loadtest`'s options are documented by the load-test work, not here.
NOT_OURS = {"cronwire loadtest"}


def _parsers(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                yield from _parsers(child)


def test_configuration_defaults_have_no_python_reprs() -> None:
    shown = dict(describe())
    assert shown["SCHEDULER_ROLES"] == "api,planner,executor"
    assert shown["SCHEDULER_DATABASE_URL"].startswith("unset")
    assert shown["SCHEDULER_AUTO_MIGRATE"] == "true"
    assert shown["SCHEDULER_HOME"] == "./.cronwire"
    assert shown["SCHEDULER_INSTANCE_ID"] == "<hostname>-<pid>"
    assert not [v for v in shown.values() if PYTHON_REPRS.search(v)], shown


def test_top_level_help_has_no_python_reprs(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--help"])
    assert not PYTHON_REPRS.search(capsys.readouterr().out)


@pytest.mark.parametrize("parser", [p for p in _parsers(build_parser())
                                    if p.prog not in NOT_OURS], ids=lambda p: p.prog)
def test_every_option_has_help_and_a_readable_default(parser: argparse.ArgumentParser) -> None:
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._VersionAction,
                               argparse._SubParsersAction)):
            continue
        assert action.help, f"{parser.prog} {action.option_strings or action.dest}: no help"
        assert not PYTHON_REPRS.search(action.help), (parser.prog, action.help)
    assert not PYTHON_REPRS.search(parser.format_help()), parser.prog


def test_schedules_create_help_shows_examples() -> None:
    create = next(p for p in _parsers(build_parser()) if p.prog == "cronwire schedules create")
    text = create.format_help()
    assert "examples:" in text and "cronwire schedules create --name" in text
