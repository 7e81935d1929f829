"""The edges keep their shape: who may import what, read from the source (no imports run).

The composition root (bootstrap/: container.py for a serving replica, factories.py for
every other entry point) is the only code that knows adapters and dependency-injector; the API gets
plain ports; the use cases know only the ports and the domain.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "cronwire"


def _imports(path: Path) -> set[str]:
    """Every module ``path`` imports, at any depth (lazy imports and TYPE_CHECKING too)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module is not None:
            found.add(node.module)
    return found


def _modules(*patterns: str) -> list[Path]:
    paths = sorted({p for pattern in patterns for p in PACKAGE.glob(pattern)})
    assert paths, f"no modules match {patterns}"
    return paths


def _offending(paths: list[Path], forbidden: tuple[str, ...],
               allowed: tuple[str, ...] = ()) -> dict[str, list[str]]:
    bad: dict[str, list[str]] = {}
    for path in paths:
        hits = sorted(m for m in _imports(path)
                      if m.startswith(forbidden) and not m.startswith(allowed))
        if hits:
            bad[str(path.relative_to(PACKAGE))] = hits
    return bad


def test_only_the_container_imports_dependency_injector() -> None:
    others = [p for p in _modules("**/*.py") if p.name != "container.py"]
    assert _offending(others, ("dependency_injector",)) == {}


def test_the_api_knows_ports_not_the_container_config_or_adapters() -> None:
    forbidden = ("dependency_injector", "cronwire.bootstrap", "cronwire.config",
                 "cronwire.adapters", "asyncpg")
    assert _offending(_modules("api/*.py"), forbidden) == {}


def test_the_services_know_only_ports_and_the_domain() -> None:
    forbidden = ("cronwire.adapters", "cronwire.api", "cronwire.bootstrap", "cronwire.config",
                 "asyncpg", "fastapi")
    assert _offending(_modules("service/**/*.py"), forbidden) == {}


@pytest.mark.parametrize("pattern", ["cli/*.py", "bootstrap/replica.py", "loadtest/harness.py",
                                     "chaos/harness.py", "chaos/faults.py"])
def test_entry_points_get_their_postgres_from_the_composition_root(pattern: str) -> None:
    # The harnesses parse their own SQL files with the shared parser; nothing else of the
    # Postgres adapters is theirs to wire.
    assert _offending(_modules(pattern), ("cronwire.adapters.postgres",),
                      allowed=("cronwire.adapters.postgres.sql",)) == {}


def test_harness_sql_is_not_among_the_production_queries() -> None:
    production = {p.stem for p in (PACKAGE / "adapters" / "postgres" / "queries").glob("*.sql")}
    assert not production & {"chaos", "loadtest", "bound"}
    assert (PACKAGE / "chaos" / "chaos.sql").exists()
    assert (PACKAGE / "loadtest" / "loadtest.sql").exists()
