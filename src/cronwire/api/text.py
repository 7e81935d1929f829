"""Text a client gives that may reach the database: Postgres ``text`` holds neither NUL nor
a lone UTF-16 surrogate (which is no character at all). Refused where the text arrives,
naming the field, instead of failing in the database (where it would read as an outage)."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator


def clean_text(value: str) -> str:
    if "\x00" in value:
        raise ValueError("must not contain a NUL character")
    if any("\ud800" <= ch <= "\udfff" for ch in value):
        raise ValueError("must not contain a lone UTF-16 surrogate (not valid Unicode)")
    return value


# Any text a client gives that may reach the database.
Text = Annotated[str, AfterValidator(clean_text)]
