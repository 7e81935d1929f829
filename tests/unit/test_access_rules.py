"""The pure rules of scopes, audit and versions (ADR 0056): scopes nest, durations parse, diffs are field by field with
sealed values masked and an unchanged document gives no diff at all."""

from __future__ import annotations

from datetime import timedelta

import pytest

from cronwire.api.versions import parse_if_match
from cronwire.domain.access import Scope, covers, parse_expires_in, strongest
from cronwire.domain.audit import SEALED, diff
from cronwire.domain.errors import RuleViolation
from cronwire.domain.model import Target
from cronwire.domain.schedule_definition import spec_definition, spec_from_definition
from cronwire.domain.schedules import ScheduleSpec


@pytest.mark.parametrize(("held", "needed", "allowed"), [
    (Scope.READ, Scope.READ, True), (Scope.READ, Scope.WRITE, False),
    (Scope.WRITE, Scope.READ, True), (Scope.WRITE, Scope.ADMIN, False),
    (Scope.ADMIN, Scope.WRITE, True), (Scope.ADMIN, Scope.ADMIN, True)])
def test_scopes_nest(held: Scope, needed: Scope, allowed: bool) -> None:
    assert covers(held, needed) is allowed


def test_the_strongest_declared_scope_is_needed() -> None:
    assert strongest([]) is Scope.READ
    assert strongest(["read", "admin", "write"]) is Scope.ADMIN


@pytest.mark.parametrize(("text", "length"), [
    ("45s", timedelta(seconds=45)), ("90m", timedelta(minutes=90)), ("12h", timedelta(hours=12)),
    ("30d", timedelta(days=30)), ("2w", timedelta(weeks=2))])
def test_durations(text: str, length: timedelta) -> None:
    assert parse_expires_in("--expires-in", text) == length


@pytest.mark.parametrize("text", ["", "30", "d", "0d", "-1d", "1y", "3651d", "1.5h", "30 d x"])
def test_bad_durations_name_the_flag(text: str) -> None:
    with pytest.raises(RuleViolation, match="--expires-in"):
        parse_expires_in("--expires-in", text)


def test_a_diff_is_field_by_field_and_masks_sealed_values() -> None:
    before = {"name": "a", "target": {"url": "u", "headers": {"k": "one", "gone": "x"}},
              "retry": {"max_attempts": 3}}
    after = {"name": "b", "target": {"url": "u", "headers": {"k": "two", "new": "y"}},
             "retry": {"max_attempts": 3}}
    assert diff(before, after) == {
        "name": ["a", "b"], "target.headers.gone": [SEALED, None],
        "target.headers.k": [SEALED, SEALED], "target.headers.new": [None, SEALED]}
    assert diff(after, after) == {}
    assert diff(None, {"name": "x", "target": {"headers": {}}}) == {"name": [None, "x"]}


def test_a_definition_round_trips() -> None:
    spec = ScheduleSpec(name="n", cron="0 3 * * *", timezone="Europe/Berlin",
                        target=Target("https://example.com/h", "PUT", {"a": "b"}, "{}"))
    assert spec_from_definition(spec_definition(spec)) == spec


@pytest.mark.parametrize(("raw", "version"), [
    (None, None), ("*", None), ('"3"', 3), ("3", 3), ('W/"12"', 12)])
def test_if_match(raw: str | None, version: int | None) -> None:
    assert parse_if_match(raw) == version


@pytest.mark.parametrize("raw", ['"x"', '"-1"', "", '"1' + "0" * 30 + '"'])
def test_a_bad_if_match_is_a_422_naming_it(raw: str) -> None:
    with pytest.raises(RuleViolation, match="If-Match"):
        parse_if_match(raw)
