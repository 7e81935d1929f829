"""Free text a tenant or an operator names something with (a schedule's name, a pause
note, a flow-control key, a tenant's name): what it may hold. Pure, no I/O.

A label is shown to people (the console, the CLI, alert payloads), so it must show
something, and must not be able to hide or reorder what is around it. Control and format
characters (Unicode Cc and Cf: NUL, newlines, zero-width spaces, bidirectional overrides
such as U+202E) are refused, and at least one visible character is required. "Visible"
means a letter, digit, punctuation mark or symbol that is not one of the characters
Unicode renders as nothing (default-ignorable ones such as U+3164 HANGUL FILLER, which
is a letter) or as a blank (U+2800 BRAILLE PATTERN BLANK): "\u3164" alone is as empty
as "\u200b" alone.

Stored labels are not checked again on read: a name accepted by an older release stays
readable, and a change that leaves it as it is does not fail on it.
"""

from __future__ import annotations

import unicodedata

from cronwire.domain.errors import RuleViolation

# Refused anywhere in a label: Cc (C0, DEL, C1), Cf (format: zero-width, bidi controls,
# soft hyphen, tags) and Cs (a lone surrogate is no character; Postgres cannot store it).
_REFUSED_CATEGORIES = {"Cc": "a control character", "Cf": "a format character",
                       "Cs": "a lone surrogate"}
# Letters, numbers, punctuation and symbols can be seen on their own (a mark needs a
# base to sit on; a space or separator shows nothing).
_VISIBLE_CLASSES = frozenset("LNPS")
# Default_Ignorable_Code_Point (Unicode's DerivedCoreProperties.txt) outside Cf, which is
# refused anyway: letters and marks that render as nothing. Plus U+2800, a blank symbol.
_INVISIBLE_RANGES = (
    (0x034F, 0x034F), (0x115F, 0x1160), (0x17B4, 0x17B5), (0x180B, 0x180F),
    (0x2065, 0x2065), (0x2800, 0x2800), (0x3164, 0x3164), (0xFE00, 0xFE0F),
    (0xFFA0, 0xFFA0), (0xFFF0, 0xFFF8), (0xE0000, 0xE0FFF),
)


def _invisible(char: str) -> bool:
    point = ord(char)
    return any(low <= point <= high for low, high in _INVISIBLE_RANGES)


def label_refusal(value: str, max_chars: int) -> str | None:
    """Why ``value`` cannot be a label of at most ``max_chars`` characters, as the rest
    of a sentence naming the field (``"must contain ..."``); None when it can."""
    if len(value) > max_chars:
        return f"must be at most {max_chars} characters"
    visible = False
    for char in value:
        category = unicodedata.category(char)
        refused = _REFUSED_CATEGORIES.get(category)
        if refused is not None:
            return (f"must not contain {refused} (U+{ord(char):04X}); names and notes are "
                    "shown to people")
        if not visible and category[0] in _VISIBLE_CLASSES and not _invisible(char):
            visible = True
    if not visible:
        return "must contain at least one visible character"
    return None


def check_label(field: str, value: str, max_chars: int) -> None:
    """Raise RuleViolation naming ``field`` unless ``value`` is an acceptable label."""
    refusal = label_refusal(value, max_chars)
    if refusal is not None:
        raise RuleViolation(field, refusal)
