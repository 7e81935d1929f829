"""How CLI commands print results: an aligned table for people, JSON for scripts.

JSON is chosen by ``--json`` or when stdout is not a terminal, so ``cronwire ... | jq``
works without a flag. Tables show ``-`` for empty values and instants to the second.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

_INSTANT = re.compile(r"^(\d{4}-\d{2}-\d{2})T(\d{2}:\d{2}:\d{2})(?:\.\d+)?(Z|[+-]\d{2}:\d{2})$")


def wants_json(requested: bool) -> bool:
    return requested or not sys.stdout.isatty()


def print_json(value: Any, *, compact: bool = False) -> None:
    """Indented on a terminal, one line when piped (or when ``compact``, e.g. a stream)."""
    indent = None if compact or not sys.stdout.isatty() else 2
    print(json.dumps(value, indent=indent, ensure_ascii=False), flush=True)


def cell(value: Any) -> str:
    """One value as table text: instants without sub-seconds, None as '-'."""
    if value is None or value == "":
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, Mapping):
        return ", ".join(f"{k}: {v}" for k, v in value.items()) or "-"
    text = str(value)
    match = _INSTANT.match(text)
    if match:
        return f"{match[1]} {match[2]}{match[3]}"
    return " ".join(text.split())  # one line per row, whatever the value holds


@dataclass(frozen=True, slots=True)
class Column:
    header: str
    value: Callable[[Mapping[str, Any]], Any]
    width: int = 0  # fixed width for streamed rows (tables whose rows are not known yet)


def field(name: str) -> Callable[[Mapping[str, Any]], Any]:
    return lambda row: row.get(name)


MAX_CELL = 60  # a long error or response excerpt is cut in tables; `get` shows it whole


def _short(text: str) -> str:
    return text if len(text) <= MAX_CELL else text[: MAX_CELL - 1] + "…"


def render_table(rows: Sequence[Mapping[str, Any]], columns: Sequence[Column]) -> str:
    cells = [[_short(cell(column.value(row))) for column in columns] for row in rows]
    widths = [max([len(c.header), *(len(r[i]) for r in cells)]) for i, c in enumerate(columns)]
    lines = [_line([c.header for c in columns], widths)]
    lines += [_line(r, widths) for r in cells]
    return "\n".join(lines)


def stream_header(columns: Sequence[Column]) -> str:
    return _line([c.header for c in columns], _stream_widths(columns))


def stream_row(row: Mapping[str, Any], columns: Sequence[Column]) -> str:
    return _line([_short(cell(c.value(row))) for c in columns], _stream_widths(columns))


def _stream_widths(columns: Sequence[Column]) -> list[int]:
    return [max(len(c.header), c.width) for c in columns]


def _line(texts: Iterable[str], widths: Sequence[int]) -> str:
    return "  ".join(t.ljust(w) for t, w in zip(texts, widths, strict=True)).rstrip()


def flatten(value: Mapping[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    """Nested objects as dotted keys: {"target": {"url": u}} -> [("target.url", u)]."""
    pairs: list[tuple[str, Any]] = []
    for key, item in value.items():
        name = f"{prefix}{key}"
        if isinstance(item, Mapping) and item and key != "headers":
            pairs += flatten(item, f"{name}.")
        elif isinstance(item, list) and all(not isinstance(i, (Mapping, list)) for i in item):
            pairs.append((name, ", ".join(str(i) for i in item)))  # alerts' events, tags
        elif not isinstance(item, list):
            pairs.append((name, item))
    return pairs


def readable_ms(ms: float | None) -> str:
    """A duration for people, as the console writes it: "840 ms", "4.57 s", "76.2 min"."""
    if ms is None:
        return "—"
    if abs(ms) < 1000:
        return f"{round(ms)} ms"
    if abs(ms) < 60_000:
        return f"{ms / 1000:.{2 if ms < 10_000 else 1}f} s"
    return f"{ms / 60_000:.1f} min"


def render_fields(value: Mapping[str, Any]) -> str:
    """One object as aligned ``key  value`` lines (a list of objects is left to its own
    table; a list of words is one line)."""
    pairs = flatten(value)
    width = max((len(k) for k, _ in pairs), default=0)
    return "\n".join(f"{k.ljust(width)}  {cell(v)}" for k, v in pairs)


def show(args: argparse.Namespace, value: Any, render: Callable[[Any], str]) -> None:
    if wants_json(args.json):
        print_json(value)
    else:
        print(render(value))


def show_page(args: argparse.Namespace, page: Mapping[str, Any],
               columns: Sequence[Column]) -> None:
    show(args, page, lambda p: render_table(p["items"], columns))
    if not wants_json(args.json) and page.get("next_cursor"):
        print(f"(more: --cursor {page['next_cursor']})", file=sys.stderr)
