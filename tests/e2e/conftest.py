"""Fixtures of the command-line modules (tests/e2e/test_cli_*.py) that drive a live
`cronwire serve` from the shell.

Module-scoped: each module that asks gets one server (all roles) on a database of its own
for all its tests, and tests/support/suite_plugin.py keeps that module on one worker.
Tests create their own tenants, so they share nothing but the process. A module may
define its own ``cli`` (test_cli_tenant_limit.py does: no server needed)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from cronwire.loopback import free_port
from tests.support.cli_shell import InProcess, Live, spawn_serve
from tests.support.processes import stop_process
from tests.support.servers import DatabaseFactory


@pytest.fixture(scope="module")
def module_database(database_factory: DatabaseFactory) -> Iterator[str]:
    name, dsn = asyncio.run(database_factory.create())
    yield dsn
    asyncio.run(database_factory.drop(name))


@pytest.fixture(scope="module")
def live(module_database: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    port = free_port()
    log = tmp_path_factory.mktemp("cli-shell") / "serve.log"
    proc = spawn_serve(module_database, port, "api,planner,executor", log)
    try:
        yield Live(module_database, f"http://127.0.0.1:{port}")
    finally:
        stop_process(proc)


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        live: Live) -> InProcess:
    return InProcess(monkeypatch, capsys, live)
