"""The simulator runs the real services over the memory adapters only: it imports no
other adapter (no database, broker or HTTP client can sneak in), the service package
never imports it, and the replicas it starts are built from the service classes."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "cronwire"


def _imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def test_the_simulator_reaches_only_the_memory_adapters() -> None:
    offending = {
        str(path.relative_to(PACKAGE)): sorted(
            name for name in _imports(path)
            if name.startswith("cronwire.adapters") and not name.startswith(
                "cronwire.adapters.memory"))
        for path in (PACKAGE / "sim").glob("*.py")
    }
    assert {name: found for name, found in offending.items() if found} == {}


def test_the_services_never_import_the_simulator() -> None:
    offending = [str(path) for path in (PACKAGE / "service").rglob("*.py")
                 if any(name.startswith("cronwire.sim") for name in _imports(path))]
    assert offending == []


def test_the_replicas_are_the_service_classes() -> None:
    imported = _imports(PACKAGE / "sim" / "replica.py")
    assert {"cronwire.service.executor", "cronwire.service.executor.hybrid_claims",
            "cronwire.service.outbox_relay", "cronwire.service.planner"} <= imported
