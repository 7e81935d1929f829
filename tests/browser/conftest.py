"""Fixtures of the browser tests: one real `cronwire serve` (api, planner, executor) per
module on a database of its own, a loopback sink, one chromium; per test a new tenant and
a fresh browser context whose requests may not leave loopback (the console must work
offline). Test modules here run on the module's event loop:
``pytestmark = [needs_chromium, pytest.mark.asyncio(loop_scope="module")]``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from urllib.parse import urlsplit

import asyncpg
import pytest
import pytest_asyncio
from playwright.async_api import (
    Browser,
    ConsoleMessage,
    Dialog,
    Route,
    async_playwright,
    expect,
)

from cronwire.adapters.postgres.pool import create_pool
from cronwire.adapters.postgres.tenants import PostgresTenantStore
from cronwire.harness.sink import Reply, Sink, always
from tests.support.browser import CHROMIUM, CHROMIUM_ARGS, LOOPBACK, Console, Watched
from tests.support.replicas import Replica, ReplicaSet
from tests.support.servers import DatabaseFactory

MODULE = {"scope": "module", "loop_scope": "module"}


@pytest_asyncio.fixture(**MODULE)
async def module_database(database_factory: DatabaseFactory) -> AsyncIterator[str]:
    name, dsn = await database_factory.create()
    yield dsn
    await database_factory.drop(name)


@pytest_asyncio.fixture(**MODULE)
async def module_pool(module_database: str) -> AsyncIterator[asyncpg.Pool]:
    pool = await create_pool(module_database, 2)
    yield pool
    await pool.close()


@pytest_asyncio.fixture(**MODULE)
async def sink() -> AsyncIterator[Sink]:
    async with Sink() as running:
        yield running


@pytest_asyncio.fixture(**MODULE)
async def replica(module_database: str, tmp_path_factory: pytest.TempPathFactory,
                  ) -> AsyncIterator[Replica]:
    async with ReplicaSet(module_database, log_dir=tmp_path_factory.mktemp("console")) as fleet:
        yield await fleet.spawn("console", roles="api,planner,executor", delivery_timeout=2)


@pytest_asyncio.fixture(**MODULE)
async def browser() -> AsyncIterator[Browser]:
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(executable_path=str(CHROMIUM),
                                                    args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            await launched.close()


@pytest_asyncio.fixture(loop_scope="module")
async def console(replica: Replica, browser: Browser, module_pool: asyncpg.Pool,
                  sink: Sink, request: pytest.FixtureRequest) -> AsyncIterator[Console]:
    # A tenant of its own per test, issued the way `cronwire tenant create` does.
    issued = await PostgresTenantStore(module_pool).create(request.node.name[:60])
    context = await browser.new_context(viewport={"width": 1280, "height": 900})
    await context.grant_permissions(["clipboard-read", "clipboard-write"],
                                    origin=replica.base_url)
    watched = Watched()

    async def offline_only(route: Route) -> None:
        if urlsplit(route.request.url).hostname in LOOPBACK:
            await route.continue_()
        else:
            watched.external_requests.append(route.request.url)
            await route.abort()

    await context.route("**/*", offline_only)
    page = await context.new_page()
    page.set_default_timeout(15_000)
    # Assertions wait as long as actions: 5 s (Playwright's default) is too short for
    # Redoc to render on a loaded two-core machine.
    expect.set_options(timeout=15_000)

    def on_console(message: ConsoleMessage) -> None:
        if message.type == "error":
            watched.console_errors.append(message.text)

    async def on_dialog(dialog: Dialog) -> None:
        watched.dialogs.append(dialog.message)
        await dialog.dismiss()

    page.on("console", on_console)
    page.on("pageerror", lambda error: watched.console_errors.append(f"pageerror: {error}"))
    page.on("dialog", on_dialog)
    try:
        yield Console(replica.base_url, issued.token, str(issued.tenant_id), page, context,
                      watched, sink)
    finally:
        await context.close()
        sink.behaviour = always(Reply())



