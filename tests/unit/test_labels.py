"""Labels a tenant or an operator names things with (CONTRACT.md, "Tenant isolation in
depth"): at least one visible character; Unicode control (Cc) and format (Cf) characters
refused, naming the field."""

from __future__ import annotations

import sys
import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cronwire.domain.errors import RuleViolation
from cronwire.domain.labels import check_label, label_refusal

MAX = 200


@pytest.mark.parametrize("value", [
    "\u200b",  # ZERO WIDTH SPACE (Cf)
    "\u202eevil\u202c",  # RIGHT-TO-LEFT OVERRIDE ... POP DIRECTIONAL FORMATTING (Cf)
    "\u0000",  # NUL (Cc)
    "night\nly",  # a newline (Cc)
    "a\x85b",  # NEL, a C1 control (Cc)
    "report\u00ad",  # SOFT HYPHEN (Cf)
    "\ufeffname",  # BYTE ORDER MARK (Cf)
    "tag\U000e0041",  # a TAG character (Cf)
    "a\ud800b",  # a lone surrogate (Cs): not a character at all
], ids=repr)
def test_control_format_and_surrogate_characters_are_refused(value: str) -> None:
    with pytest.raises(RuleViolation) as refused:
        check_label("name", value, MAX)
    assert refused.value.field == "name"
    assert str(refused.value).startswith("name: must not contain ")
    assert f"U+{ord(next(c for c in value if unicodedata.category(c)[0] == 'C')):04X}" in str(
        refused.value)


@pytest.mark.parametrize("value", [
    "", " ", " \u3000\u00a0",  # nothing, or only spaces (Zs)
    "\u3164", "\u115f\u1160", "\uffa0",  # Hangul fillers: letters (Lo) that render as nothing
    "\u2800",  # BRAILLE PATTERN BLANK (So)
    "\u0301\u20dd",  # marks with nothing to sit on
    "\ufe0f", "\u034f",  # a variation selector, COMBINING GRAPHEME JOINER
    "\u2028",  # LINE SEPARATOR (Zl)
], ids=repr)
def test_a_label_needs_a_visible_character(value: str) -> None:
    assert label_refusal(value, MAX) == "must contain at least one visible character"
    with pytest.raises(RuleViolation, match=r"^note: must contain at least one visible"):
        check_label("note", value, MAX)


@pytest.mark.parametrize("value", [
    "nightly-report", "é", "日次レポート", "отчёт", "تقرير", "🙂", "1", "#", "a b",
    " padded ", "e\u0301", "\u0915\u094d\u0937",  # combining marks on a base
    "x\u3164y",  # a filler beside visible letters shows them
], ids=repr)
def test_ordinary_labels_in_any_script_are_accepted(value: str) -> None:
    assert label_refusal(value, MAX) is None
    check_label("name", value, MAX)


def test_the_length_limit_names_its_bound() -> None:
    assert label_refusal("n" * MAX, MAX) is None
    assert label_refusal("n" * (MAX + 1), MAX) == f"must be at most {MAX} characters"


_ALL_CHARACTERS = st.characters(min_codepoint=0, max_codepoint=sys.maxunicode)
_SHOWN = st.characters(categories=("Lu", "Ll", "Nd", "Po", "Sm"))


@given(st.text(_ALL_CHARACTERS, max_size=40), _ALL_CHARACTERS, st.text(_ALL_CHARACTERS,
                                                                       max_size=40))
def test_any_label_holding_a_control_or_format_character_is_refused(
        before: str, hidden: str, after: str) -> None:
    value = before + hidden + after
    if unicodedata.category(hidden) in ("Cc", "Cf", "Cs"):
        refusal = label_refusal(value, MAX)
        assert refusal is not None and refusal.startswith("must not contain ")


@given(st.text(_ALL_CHARACTERS, max_size=40))
def test_an_accepted_label_has_no_control_or_format_character_and_shows_something(
        value: str) -> None:
    if label_refusal(value, MAX) is None:
        categories = {unicodedata.category(c) for c in value}
        assert not categories & {"Cc", "Cf", "Cs"}
        assert value.strip()


@given(st.text(_SHOWN, min_size=1, max_size=MAX))
def test_letters_digits_punctuation_and_symbols_are_always_accepted(value: str) -> None:
    assert label_refusal(value, MAX) is None
