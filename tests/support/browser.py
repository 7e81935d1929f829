"""Browser-test helpers: Debian's chromium under Playwright, and what a page is watched for.

Chromium is a Debian package (`apt-get install chromium`, done by .ci/run); Playwright's
own browser download is not used. Without /usr/bin/chromium the browser tests skip, except
in CI (CI=true), where a missing browser is a failure.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from playwright.async_api import BrowserContext, Page

from cronwire.harness.sink import Sink

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = Path(os.environ.get("CRONWIRE_TEST_ARTIFACTS", REPO / "test-artifacts")) / "browser"
LOOPBACK = {"127.0.0.1", "localhost", "[::1]", "::1"}
# The browser's own note on a 422 a test provokes on purpose (a form's refusal).
REFUSED_422 = re.compile(r"^Failed to load resource: the server responded with a status of "
                         r"422 \(Unprocessable (Entity|Content)\)$")


# Test modules here mark themselves with this: skip without the browser, but not in CI.
needs_chromium = pytest.mark.skipif(
    not CHROMIUM.exists() and not os.environ.get("CI"),
    reason=f"{CHROMIUM} not installed (apt-get install chromium)",
)


@dataclass
class Watched:
    """What a page did that a test asserts never happens (or happens only as expected)."""

    console_errors: list[str] = field(default_factory=list)
    dialogs: list[str] = field(default_factory=list)
    external_requests: list[str] = field(default_factory=list)


@dataclass
class Console:
    base_url: str
    token: str
    tenant_id: str
    page: Page
    context: BrowserContext
    watched: Watched
    sink: Sink

    async def api(self, method: str, path: str, body: Any = None) -> Any:
        """The public API directly (set-up that is not under test)."""
        headers = {"Authorization": f"Bearer {self.token}"}
        async with aiohttp.ClientSession() as session, session.request(
            method, f"{self.base_url}{path}", json=body, headers=headers
        ) as response:
            assert response.status < 300, await response.text()
            return None if response.status == 204 else await response.json()

    def unexpected_errors(self, expected: re.Pattern[str] = REFUSED_422) -> list[str]:
        """The page's console errors but those ``expected``."""
        return [e for e in self.watched.console_errors if not expected.match(e)]

    async def screenshot(self, name: str, *, full_page: bool = True) -> Path:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        path = ARTIFACTS / name
        await self.page.screenshot(path=str(path), full_page=full_page)
        return path

    async def screenshot_of(self, selector: str, name: str) -> Path:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        path = ARTIFACTS / name
        await self.page.locator(selector).screenshot(path=str(path))
        return path

    async def sign_in(self) -> None:
        await self.page.goto(f"{self.base_url}/console")
        await self.page.get_by_label("API token").fill(self.token)
        await self.page.get_by_role("button", name="Sign in").click()
        await self.page.get_by_role("heading", name="Schedules", level=1).wait_for()


