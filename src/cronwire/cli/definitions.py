"""Schedule definition files for `cronwire apply` and `plan` (ADR 0057): YAML or JSON (read
as YAML), one schedule or a list per file, files or directories of them; `${VAR}` in a
string is read from the environment. Every refusal is a ConfigError (exit 2, one line)
naming the file and line.

Files are hostile input as far as the loader knows: PyYAML's safe loader (no Python
objects), duplicate keys refused (YAML lets the last one win silently), at most
MAX_ALIASES aliases and MAX_NODES values once expanded (a "billion laughs" file refers to
itself exponentially), and at most MAX_FILE_BYTES a file.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from cronwire.domain.errors import ConfigError

MAX_FILE_BYTES = 32 * 1024 * 1024
MAX_ALIASES = 100
MAX_NODES = 2_000_000
SUFFIXES = (".yaml", ".yml", ".json")
_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_BASE = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's parser when installed


class LineMap(dict[str, Any]):
    """A mapping that remembers the line (1-based) each of its keys is on."""

    lines: dict[str, int]


class _Loader(_BASE):  # type: ignore[misc, valid-type]
    def __init__(self, stream: str, name: str) -> None:
        super().__init__(stream)
        self.name = name
        self.aliases = 0

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        # A node met again is an alias (libyaml's parser composes in C, so they are
        # counted here, where the Python constructor meets each reference).
        if node in self.constructed_objects:
            self.aliases += 1
            if self.aliases > MAX_ALIASES:
                raise ConfigError(f"{self.name}:{node.start_mark.line + 1}: more than "
                                  f"{MAX_ALIASES} aliases; refused (a file that expands "
                                  "without bound)")
        return super().construct_object(node, deep=deep)

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> LineMap:
        result = LineMap()
        result.lines = {}
        self.flatten_mapping(node)
        for key_node, value_node in node.value:
            key = self.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            if not isinstance(key, str):
                raise ConfigError(f"{self.name}:{line}: a key must be text, got {key!r}")
            if key in result:
                raise ConfigError(f"{self.name}:{line}: duplicate key {key!r} (first on line "
                                  f"{result.lines[key]})")
            result[key] = self.construct_object(value_node, deep=deep)
            result.lines[key] = line
        return result


_Loader.add_constructor("tag:yaml.org,2002:map", _Loader.construct_mapping)


@dataclass(frozen=True)
class Definition:
    """One schedule read from a file: where it starts, and its fields."""

    file: str
    line: int
    fields: LineMap

    def line_of(self, dotted: str) -> int:
        """The line of a dotted field (``target.url``), or of the nearest part found."""
        line, node = self.line, self.fields
        for part in dotted.split("."):
            if not isinstance(node, LineMap) or part not in node:
                break
            line, node = node.lines[part], node[part]
        return line


def files_in(paths: Sequence[str]) -> list[Path]:
    found: list[Path] = []
    for text in paths:
        path = Path(text)
        if path.is_dir():
            found += sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in SUFFIXES)
        elif path.is_file():
            found.append(path)
        else:
            raise ConfigError(f"-f {text}: no such file or directory")
    return found


def _substituted(value: Any, name: str, budget: list[int]) -> Any:
    """A copy of ``value`` with ${VAR} replaced, refusing past MAX_NODES values (an
    alias-built bomb expands here, not in the loader)."""
    budget[0] -= 1
    if budget[0] < 0:
        raise ConfigError(f"{name}: more than {MAX_NODES:,} values once aliases are expanded; "
                          "refused")
    if isinstance(value, LineMap):
        copy = LineMap({k: _substituted(v, name, budget) for k, v in value.items()})
        copy.lines = value.lines
        return copy
    if isinstance(value, list):
        return [_substituted(v, name, budget) for v in value]
    if isinstance(value, str):
        return _VARIABLE.sub(lambda m: _variable(m.group(1), name), value)
    return value


def _variable(variable: str, name: str) -> str:
    value = os.environ.get(variable)
    if value is None:
        raise ConfigError(f"{name}: ${{{variable}}} is not set in the environment")
    return value


def _definitions_of(path: Path) -> Iterator[Definition]:
    name = str(path)
    if path.stat().st_size > MAX_FILE_BYTES:
        raise ConfigError(f"{name}: larger than {MAX_FILE_BYTES:,} bytes; split it")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{name}: cannot be read ({exc})") from None
    loader = _Loader(text, name)
    try:
        document = loader.get_single_data()
    except yaml.MarkedYAMLError as exc:
        line = exc.problem_mark.line + 1 if exc.problem_mark else 1
        raise ConfigError(f"{name}:{line}: not valid YAML or JSON ({exc.problem})") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{name}: not valid YAML or JSON ({exc})") from None
    finally:
        loader.dispose()
    document = _substituted(document, name, [MAX_NODES])
    items = document if isinstance(document, list) else [document]
    if document is None:
        items = []
    for position, item in enumerate(items):
        if not isinstance(item, LineMap):
            raise ConfigError(f"{name}: item {position + 1} is not a schedule (a mapping of "
                              "fields)")
        yield Definition(name, min(item.lines.values(), default=1), item)


def load_definitions(paths: Sequence[str]) -> list[Definition]:
    """Every schedule in ``paths`` (files, or directories of .yaml/.yml/.json files)."""
    return [d for path in files_in(paths) for d in _definitions_of(path)]
