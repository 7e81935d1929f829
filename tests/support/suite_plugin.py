"""The test suite's own plumbing, imported by tests/conftest.py: which tests pytest-xdist
keeps together on one worker, and a closing section that lists the skipped tests by why.
On its own so that tests/unit/test_suite_plugin.py can run it against a small suite."""

from __future__ import annotations

import gc
import signal

import pytest

from tests.support.brokers import APACHE, APACHE_CLUSTER

# -- running in parallel (pytest-xdist, `-n` in pyproject's addopts; ADR 0037) -------


def _apache_group(item: pytest.Item) -> str | None:
    """The group of a test on Apache Kafka JVMs, by the brokers it uses: its session
    fixtures, or a parameter naming them (the brokers a test chooses by name). The 3-node
    cluster and the single node get a worker each, so each starts once in the run."""
    names = set(getattr(item, "fixturenames", ()))
    callspec = getattr(item, "callspec", None)
    params = [v for v in (callspec.params.values() if callspec else ()) if isinstance(v, str)]
    if "apache_kafka_cluster" in names or any(APACHE_CLUSTER in value for value in params):
        return "apache-kafka-3"
    if "apache_kafka" in names or any(APACHE in value for value in params):
        return "apache-kafka-1"
    return None


def _has_module_fixture(item: pytest.Item) -> bool:
    """Whether ``item`` uses a module-scoped fixture (a server per module, a module's event
    loop): spread over workers, each worker would set it up again."""
    info = getattr(item, "_fixtureinfo", None)
    definitions = info.name2fixturedefs.values() if info is not None else ()
    return any(defs and defs[-1].scope == "module" for defs in definitions)


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the marks
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Groups that `--dist loadgroup` keeps on one worker each:
    - ``apache-kafka-3`` / ``apache-kafka-1``: the tests on Apache Kafka's JVMs, so those
      brokers (session fixtures, a JVM per node) start once in the run, not once a worker;
    - ``processes``: the chaos and load tests, which time fleets of replica processes under
      faults; two at once on a 2-core machine starve each other;
    - ``chaos-command`` and ``flow-control-chaos``: the `cronwire chaos` runs (two module
      fixtures, ~3 minutes) and flow control's fleet tests (~2.5 minutes), each beside
      ``processes`` rather than behind it: their verdicts are counts and bounds (lost,
      duplicated, peak in flight, requests per second, a hold's length) that contention
      slows but does not change, or a fire lag with a wide margin (p99 under 1 s against
      0.003-0.06 s measured); behind it they made the suite's critical path;
    - one group per module with a module-scoped fixture, which then runs once.
    The rest spreads over the workers test by test."""
    for item in items:
        if item.get_closest_marker("xdist_group") is not None:
            continue
        group = _apache_group(item)
        if group is None and item.nodeid.startswith("tests/chaos/test_chaos_command.py"):
            group = "chaos-command"
        if group is None and item.nodeid.startswith(
                "tests/chaos/test_flow_control_processes.py"):
            group = "flow-control-chaos"
        if group is None and (item.get_closest_marker("chaos") is not None
                              or item.nodeid.startswith("tests/chaos/")
                              or item.nodeid.startswith("tests/e2e/test_loadtest.py")):
            group = "processes"
        if group is None and _has_module_fixture(item):
            group = f"module:{item.nodeid.split('::')[0]}"
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))


class _GroupInNodeId:
    """pytest-xdist 3.8 tells its controller a test's group by appending ``@group`` to the
    node id on the worker, through ``item._nodeid``; pytest 9.2 keeps the id in
    ``item._id`` instead, so the suffix is silently lost and every group is spread like
    any test (pytest-dev/pytest-xdist#1386, fix pending in #1388). Until then: the suffix
    is added here, after xdist's own hook, the way #1388 does it."""

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        from _pytest.nodeid import NodeId

        for item in items:
            mark = item.get_closest_marker("xdist_group")
            if mark is None or "@" in item.nodeid or not hasattr(item, "_id"):
                continue
            group = mark.args[0] if mark.args else mark.kwargs.get("name", "default")
            # The suffix in the last name, after any [params], so the id renders the same
            # however pytest builds it (str, or from its parts).
            known = item._id
            last = known.names[-1] + ("" if known.params is None else f"[{known.params}]")
            item._id = NodeId(path=known.path, names=(*known.names[:-1], f"{last}@{group}"))


def answer_ctrl_c() -> None:
    """Ctrl-C reaches the processes the tests start, however the suite was started. A
    shell starts a background job (``cmd &`` without job control: a script, nohup, some
    CI runners) with SIGINT ignored, every child inherits that, and the CLI rightly keeps
    an ignored SIGINT ignored (cli/__init__.py): the tests that press Ctrl-C on a command
    then saw it run on (11 failures in one such run on 2026-12-06). A handler of our own
    is reset to the default by exec, so the children get SIGINT as a terminal gives it."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def compile_our_sources() -> bool:
    """Write the bytecode of cronwire's own modules, once, before the workers start. The
    machines we run on set ``PYTHONDONTWRITEBYTECODE=1``, so without this none is ever
    written for an editable install's sources, and each of a run's ~150 replicas and
    ~100 CLI processes compiled every module it imports (a replica with every role
    started on 1.18 CPU-s instead of 0.89). Explicit compilation is not the implicit
    writing that variable turns off; pip compiles the installed libraries the same way.
    True when every module compiled (or its bytecode was already current)."""
    import compileall
    from pathlib import Path

    import cronwire

    source = Path(cronwire.__file__).parent
    return bool(compileall.compile_dir(source, quiet=2, workers=1))


def pytest_configure(config: pytest.Config) -> None:
    answer_ctrl_c()  # in the controller and in every worker
    if not hasattr(config, "workerinput"):  # the controller (or a run without xdist)
        compile_our_sources()
    if getattr(config.option, "loadgroup", False):  # set by xdist, on its workers only
        config.pluginmanager.register(_GroupInNodeId(), "cronwire-xdist-group-in-node-id")


# -- what did not run --------------------------------------------------------------


def _skip_reason(report: pytest.TestReport) -> str:
    longrepr = report.longrepr
    reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
    return reason.removeprefix("Skipped: ")


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """After the run: which tests were skipped, grouped by why, so a passing run still
    says what it did not check (a missing browser, promtool, helm, the `nobody` user's
    reach, the full-size chaos runs)."""
    skipped = [r for r in terminalreporter.stats.get("skipped", [])
               if isinstance(r, pytest.TestReport)]
    if not skipped:
        return
    by_reason: dict[str, list[str]] = {}
    for report in skipped:
        path, _line, name = report.location  # not the node id: it carries an xdist group
        by_reason.setdefault(_skip_reason(report), []).append(f"{path}::{name}")
    terminalreporter.section(f"not run: {len(skipped)} skipped tests, by reason", sep="=",
                             yellow=True, bold=True)
    for reason, nodeids in sorted(by_reason.items(), key=lambda entry: -len(entry[1])):
        terminalreporter.line(f"{len(nodeids):4d} x {reason}", yellow=True)
        for nodeid in nodeids[:3]:
            terminalreporter.line(f"         {nodeid}")
        if len(nodeids) > 3:
            terminalreporter.line(f"         ... and {len(nodeids) - 3} more")


# -- leaks attributed to their module -------------------------------------------------


@pytest.hookimpl(trylast=True)  # after the fixtures' teardown, before pytest's own
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """After a module's last test, collect the garbage: a socket or a file a test left
    unclosed in a reference cycle then warns (an error under ``filterwarnings = error``)
    in that module's teardown, not in whichever test the collector happens to run in
    later (CI saw a socket from an earlier module fail a cron property test).

    Then freeze what survived, as after the collection: the next module's collection
    looks only at what its own tests made. Without it every collection scanned all that
    the earlier modules had imported and kept (1.4 million objects by mid-run): 0.33 s a
    module, 102 CPU-seconds over the unit and integration modules. What survives a module
    is freed by its reference count as before; only a cycle among survivors that later
    becomes garbage is no longer collected (as for what the collection's freeze keeps),
    and a socket in such a cycle no longer warns. tests/unit/test_suite_plugin.py checks
    both halves: a module's own leak is still found at its end (pytest reports it as an
    error of the next test), and what an earlier module kept is not scanned again."""
    if nextitem is None or nextitem.path != item.path:
        gc.collect()
        gc.freeze()


def pytest_collection_finish(session: pytest.Session) -> None:
    """Everything alive once the tests are collected (the modules, their classes and
    functions, pytest's own: ~200,000 objects) lives until the end: frozen, the collector
    never scans it again. A full collection then costs ~1 ms instead of ~0.5 s, for the
    per-module collection above and for every one Python runs by itself."""
    gc.collect()
    gc.freeze()
