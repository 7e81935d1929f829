"""The suite's plumbing (tests/support/suite_plugin.py) on a small suite of its own, run
by pytest with two xdist workers as the README's command runs the real one: each group
stays on one worker, and the run ends by listing the skipped tests by reason
(ADR 0037). The groups' tests are spread through the collection, so without the plugin (or
with xdist's group suffix lost, pytest-xdist#1386) they land on both workers."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap
from collections import defaultdict
from pathlib import Path

from tests.support.suite_plugin import compile_our_sources

ROOT = Path(__file__).resolve().parents[2]

CONFTEST = '''
import os
from pathlib import Path

import pytest

from tests.support.suite_plugin import (  # noqa: F401
    pytest_collection_modifyitems, pytest_configure, pytest_terminal_summary,
)


@pytest.fixture(scope="session")
def apache_kafka():
    return "one node"


@pytest.fixture(scope="session")
def apache_kafka_cluster():
    return "three nodes"


@pytest.fixture(autouse=True)
def _where(request):
    yield
    worker = os.environ.get("PYTEST_XDIST_WORKER", "none")
    # the node id carries xdist's group suffix ("...@group") when the test has a group
    (Path(os.environ["SUITE_OUT"]) / f"{request.node.name}@{worker}").write_text(
        request.node.nodeid)
'''

# One module per kind of test, in this order, again and again: every group's modules are
# far apart in the collection.
KINDS = {
    "kafka": "def test_kafka_{n}_{i}(apache_kafka):\n    pass\n",
    "plain": "def test_plain_{n}_{i}():\n    pass\n",
    "cluster": "def test_cluster_{n}_{i}(apache_kafka_cluster):\n    pass\n",
    "module": ("@pytest.fixture(scope='module')\ndef shared():\n    return object()\n\n\n"
               "def test_module_{n}_{i}(shared):\n    pass\n"),
    "chaos": "@pytest.mark.chaos\ndef test_chaos_{n}_{i}():\n    pass\n",
}


def _suite(at: Path) -> None:
    (at / "pytest.ini").write_text("[pytest]\nmarkers =\n    chaos: a fleet under faults\n"
                                   "asyncio_default_fixture_loop_scope = function\n")
    (at / "conftest.py").write_text(CONFTEST)
    for n in range(3):
        for kind, test in KINDS.items():
            tests = "\n\n".join(test.format(n=n, i=i) for i in range(3))
            (at / f"test_{n}_{kind}.py").write_text(f"import pytest\n\n\n{tests}")
    (at / "test_skips.py").write_text(textwrap.dedent('''
        import pytest

        @pytest.mark.skip(reason="helm is not installed")
        def test_chart_a():
            pass

        @pytest.mark.skip(reason="helm is not installed")
        def test_chart_b():
            pass

        @pytest.mark.chaos
        def test_no_browser():
            pytest.skip("chromium is not installed")
    '''))


def test_groups_stay_on_one_worker_and_the_run_ends_with_what_was_skipped(
    tmp_path: Path,
) -> None:
    suite, out = tmp_path / "suite", tmp_path / "out"
    suite.mkdir()
    out.mkdir()
    _suite(suite)
    env = {**os.environ, "SUITE_OUT": str(out), "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-c", str(suite / "pytest.ini"), "--rootdir",
         str(suite), "-p", "no:cacheprovider", "-n", "2", "--dist", "loadgroup", str(suite)],
        cwd=suite, env=env, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    workers: dict[str, set[str]] = defaultdict(set)
    xdist_groups: dict[str, set[str]] = defaultdict(set)
    ran = [path for path in out.iterdir() if path.name.count("_") == 3]
    for path in ran:
        name, worker = path.name.split("@")
        _test, kind, n, _i = name.split("_")
        group = f"module {n}" if kind == "module" else kind  # a group per such module
        workers[group].add(worker)
        nodeid = path.read_text()
        xdist_groups[group].add(nodeid.rpartition("@")[2] if "@" in nodeid else "")
    assert len(ran) == 3 * 3 * len(KINDS)
    for group in ("kafka", "cluster", "chaos", "module 0", "module 1", "module 2"):
        assert len(workers[group]) == 1, (group, workers)
        assert len(xdist_groups[group]) == 1 and "" not in xdist_groups[group], xdist_groups
    # The rest is left free to spread: no group of xdist's. (Which worker ran them is up
    # to timing: on a loaded machine one worker can take them all.)
    assert xdist_groups["plain"] == {""}, xdist_groups["plain"]

    summary = done.stdout[done.stdout.index("not run: 3 skipped tests, by reason"):]
    assert "2 x helm is not installed" in summary
    assert "1 x chromium is not installed" in summary
    assert "test_skips.py::test_chart_a\n" in summary  # by location: no xdist "@group"
    assert "@" not in summary


def test_the_controller_writes_our_bytecode_whatever_the_environment_says() -> None:
    """With ``PYTHONDONTWRITEBYTECODE=1`` (our machines set it) no process writes
    bytecode for an editable install's modules, so every replica a run starts compiled
    them again; the controller writes it once, before the workers start."""
    import cronwire.loopback

    cached = Path(importlib.util.cache_from_source(cronwire.loopback.__file__))
    cached.unlink(missing_ok=True)
    assert compile_our_sources()
    assert cached.exists()


GARBAGE_CONFTEST = '''
from tests.support.suite_plugin import (  # noqa: F401
    pytest_collection_finish, pytest_runtest_teardown,
)
'''
GARBAGE_MODULES = {
    # an earlier module that keeps many objects alive for the rest of the run
    "test_1_keeps.py": '''
KEPT = []


def test_keeps_a_hundred_thousand_objects():
    KEPT.extend([n] for n in range(100_000))  # lists: always tracked by the collector
''',
    # a later module: the collector now looks at its objects only
    "test_2_looks.py": '''
import gc


def test_the_collector_no_longer_tracks_what_earlier_modules_kept():
    assert len(gc.get_objects()) < 50_000, len(gc.get_objects())
''',
    # a module that leaves a socket unclosed in a reference cycle ...
    "test_3_leaks.py": '''
import socket


def test_drops_an_open_socket_in_a_cycle():
    holder = {"socket": socket.socket()}
    holder["self"] = holder
''',
    # ... which the collection at its end finds; pytest reports it at the next test
    "test_4_after.py": '''
def test_after_the_leak():
    """Empty: the leak of the module before it is reported at this test's setup."""
''',
}


def test_a_module_leak_fails_the_run_at_once_and_collections_skip_what_was_kept(
    tmp_path: Path,
) -> None:
    """The per-module collection (suite_plugin.pytest_runtest_teardown): what survives a
    module is frozen, so the next module's collection does not scan it again (it used to
    scan 1.4 million objects by mid-run, 0.33 s a module), and a socket a module leaves in
    a cycle is still found at that module's end (pytest reports it at the next test)."""
    (tmp_path / "pytest.ini").write_text("[pytest]\nfilterwarnings =\n    error\n"
                                         "asyncio_default_fixture_loop_scope = function\n")
    (tmp_path / "conftest.py").write_text(GARBAGE_CONFTEST)
    for name, text in GARBAGE_MODULES.items():
        (tmp_path / name).write_text(text)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-c", str(tmp_path / "pytest.ini"), "--rootdir",
         str(tmp_path), "-p", "no:cacheprovider", "-n", "0", "-rA", str(tmp_path)],
        cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True,
        text=True, timeout=120,
    )
    out = done.stdout
    assert "PASSED test_1_keeps.py::test_keeps_a_hundred_thousand_objects" in out, out
    assert ("PASSED test_2_looks.py::test_the_collector_no_longer_tracks_what_earlier_"
            "modules_kept") in out, out
    assert "PASSED test_3_leaks.py::test_drops_an_open_socket_in_a_cycle" in out, out
    assert "ERROR test_4_after.py::test_after_the_leak" in out, out
    assert "ResourceWarning: unclosed <socket.socket" in out, out
