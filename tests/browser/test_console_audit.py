"""Scopes, audit and versions in the console (Debian's chromium against a real `cronwire serve`): the edit
form sends If-Match and says so when someone else saved the schedule meanwhile (nothing of
the form is written), and the Audit view lists who changed what, hostile text as text."""

from __future__ import annotations

import pytest
from playwright.async_api import expect

from tests.support.browser import Console, needs_chromium

pytestmark = [needs_chromium, pytest.mark.asyncio(loop_scope="module")]

HOSTILE = '<img src=x onerror="window.__owned=1">'


async def _schedule(console: Console, name: str) -> dict[str, object]:
    created: dict[str, object] = await console.api("POST", "/v1/schedules", {
        "name": name, "cron": "0 3 * * *", "target": {"url": f"{console.sink.url}/hook"}})
    return created


async def test_the_edit_form_says_when_someone_else_changed_the_schedule(
    console: Console,
) -> None:
    page = console.page
    created = await _schedule(console, "shared")
    await console.sign_in()
    await page.goto(f"{console.base_url}/console#/schedules/{created['id']}/edit")
    await expect(page.get_by_label("Name")).to_have_value("shared")
    # Someone else saves first.
    await console.api("PATCH", f"/v1/schedules/{created['id']}", {"name": "theirs"})
    await page.get_by_label("Name").fill("mine")
    await page.get_by_role("button", name="Save changes").click()
    error = page.locator("#form-error")
    await expect(error).to_contain_text("Someone else changed this schedule")
    await expect(error).to_contain_text("version 2; you opened version 1")
    now = await console.api("GET", f"/v1/schedules/{created['id']}")
    assert now["name"] == "theirs" and now["version"] == 2  # the form wrote nothing
    await page.locator("#edit-conflict-open").click()
    await page.get_by_role("heading", name="theirs", level=1).wait_for()
    # Editing the current version saves.
    await page.get_by_role("link", name="Edit theirs").click()
    await page.get_by_label("Name").fill("mine")
    await page.get_by_role("button", name="Save changes").click()
    await page.get_by_role("heading", name="mine", level=1).wait_for()
    assert (await console.api("GET", f"/v1/schedules/{created['id']}"))["version"] == 3
    assert console.watched.external_requests == []


async def test_the_audit_view_lists_who_changed_what(console: Console) -> None:
    page = console.page
    created = await _schedule(console, "audited")
    await console.api("PATCH", f"/v1/schedules/{created['id']}", {"name": HOSTILE})
    await console.api("POST", f"/v1/schedules/{created['id']}/pause")
    await console.sign_in()
    await page.get_by_role("link", name="Audit").click()
    await page.get_by_role("heading", name="Audit", level=1).wait_for()
    rows = page.locator("table.audit tbody tr")
    await expect(rows.first).to_contain_text("schedule.pause")
    update = rows.filter(has_text="schedule.update")
    await expect(update).to_contain_text("name")
    await expect(update).to_contain_text(HOSTILE)  # shown as text
    assert await page.evaluate("window.__owned") is None
    assert await page.locator("table.audit img").count() == 0
    await page.get_by_label("Action").select_option("schedule.create")
    await page.get_by_role("button", name="Show").click()
    await expect(rows).to_have_count(1)
    await expect(rows.first).to_contain_text("schedule.create")
    await expect(rows.first.get_by_role("link")).to_have_text(str(created["id"]))
    await console.screenshot("audit-view.png")
    assert console.watched.console_errors == []
