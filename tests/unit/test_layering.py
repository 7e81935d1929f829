"""The edges keep their shape: who may import what, read from the source (no imports run).

The composition root (bootstrap/: container.py for a serving replica, factories.py and
embedded.py for every other entry point) is the only code that knows adapters and
dependency-injector; the API gets plain ports; the use cases know only the ports and the
domain; the command line and the harnesses reach adapters only through the composition
root. No module imports another's private names, no import circle exists, and a module
stays small unless it does one thing (ALLOWED_LONG says which, and why).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "cronwire"
MAX_LINES = 300
# Modules longer than MAX_LINES that still do one thing, each with the reason.
ALLOWED_LONG = {
    "config.py": "the SCHEDULER_* settings: one dataclass, the parser of each value and the "
                 "table --help shows, read top to bottom",
    "bootstrap/container.py": "the composition root: one provider a line for every adapter "
                              "and service, read top to bottom",
    "domain/cron.py": "cron maths: parsing an expression and stepping through its "
                      "occurrences, one pure job",
    "domain/model.py": "the core records (schedule as planned, run, attempt, lease, claim) "
                       "as plain data classes, read top to bottom",
}


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"))


def _imports(path: Path) -> set[str]:
    """Every module ``path`` imports, at any depth (lazy imports and TYPE_CHECKING too)."""
    found: set[str] = set()
    for node in ast.walk(_tree(path)):
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


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _import_graph() -> dict[str, set[str]]:
    """Module -> the modules of ours it imports, at any depth. ``from a import b`` names
    the submodule ``a.b`` when there is one, else the module ``a``."""
    modules = {_module_name(path): path for path in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets: set[str] = set()
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module is not None:
                targets.add(node.module)
                targets.update(f"{node.module}.{alias.name}" for alias in node.names)
        graph[name] = set()
        for target in targets:
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != name:
                graph[name].add(target)
    return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan), iteratively."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    found.append(sorted(group))
    return found


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


def test_the_domain_does_no_io_and_knows_nothing_outside_itself() -> None:
    # Pure rules: no clock, file, process, network or environment access, no driver, and
    # no other layer of ours (the deliverers pass the User-Agent; a fresh secret's
    # randomness comes from ``secrets``).
    forbidden = ("os", "sys", "socket", "asyncio", "subprocess", "pathlib", "importlib",
                 "time", "logging", "asyncpg", "aiohttp", "httpx", "aiokafka", "fastapi",
                 "cronwire.adapters", "cronwire.service", "cronwire.api", "cronwire.bootstrap",
                 "cronwire.config", "cronwire.ports", "cronwire.cli", "cronwire.harness")
    bad = {name: [m for m in hits if m.split(".")[0] in forbidden or m.startswith(forbidden)]
           for name, hits in _offending(_modules("domain/**/*.py"), forbidden).items()}
    assert {name: hits for name, hits in bad.items() if hits} == {}


def test_configuration_knows_no_adapter() -> None:
    # config.py validates a database URL with cronwire.dsn, pure string work shared with
    # the Postgres connector; reading settings must not load a driver.
    assert _offending(_modules("config.py", "dsn.py"), ("cronwire.adapters", "asyncpg")) == {}


def test_an_adapter_knows_no_other_technologys_adapter() -> None:
    # One technology per adapter package: what two of them share lives in the domain or
    # the ports, and the composition root joins them.
    bad = {}
    for tech in sorted(p.name for p in PACKAGE.glob("adapters/*") if p.is_dir()
                       and not p.name.startswith("__")):
        found = _offending(_modules(f"adapters/{tech}/**/*.py"), ("cronwire.adapters.",),
                           (f"cronwire.adapters.{tech}",))
        bad.update(found)
    assert bad == {}


@pytest.mark.parametrize("package", ["cli", "chaos", "loadtest", "harness"])
def test_commands_and_harnesses_reach_adapters_only_through_the_composition_root(
    package: str,
) -> None:
    # The harnesses parse their own SQL files with bootstrap.factories.harness_queries and
    # start their embedded servers from bootstrap.embedded.
    assert _offending(_modules(f"{package}/**/*.py"), ("cronwire.adapters",)) == {}


def test_no_module_imports_another_modules_private_names() -> None:
    # Adapters above all: a private helper one deliverer borrowed from another tied the
    # two together (now adapters/http/target_url.py, public).
    borrowed: dict[str, list[str]] = {}
    for path in _modules("**/*.py"):
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("cronwire"):
                private = [a.name for a in node.names
                           if a.name.startswith("_") and not a.name.startswith("__")]
                if private:
                    borrowed.setdefault(str(path.relative_to(PACKAGE)), []).extend(
                        f"{node.module}.{name}" for name in private)
    assert borrowed == {}


def test_no_import_circle_in_the_package() -> None:
    # Counted with lazy and TYPE_CHECKING imports: a circle hidden in a function is still
    # two modules that cannot be understood one without the other.
    assert _circles(_import_graph()) == []


def test_the_circle_finder_finds_a_circle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert _circles(graph) == [["a", "b", "c"]]


def test_modules_stay_small_unless_they_do_one_thing() -> None:
    lengths = {str(p.relative_to(PACKAGE)): len(p.read_text(encoding="utf-8").splitlines())
               for p in _modules("**/*.py")}
    too_long = {name: n for name, n in lengths.items()
                if n > MAX_LINES and name not in ALLOWED_LONG}
    assert too_long == {}, f"over {MAX_LINES} lines: split them, or say in ALLOWED_LONG why not"
    stale = [name for name in ALLOWED_LONG if lengths.get(name, 0) <= MAX_LINES]
    assert stale == [], "no longer long (or gone): drop them from ALLOWED_LONG"


def test_harness_sql_is_not_among_the_production_queries() -> None:
    production = {p.stem for p in (PACKAGE / "adapters" / "postgres" / "queries").glob("*.sql")}
    assert not production & {"chaos", "loadtest", "bound", "seeding"}
    assert (PACKAGE / "chaos" / "chaos.sql").exists()
    assert (PACKAGE / "loadtest" / "loadtest.sql").exists()
    assert (PACKAGE / "harness" / "seeding.sql").exists()
