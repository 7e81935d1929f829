"""The console and schedules as code (ADR 0057) in Debian's chromium against a real
`cronwire serve`: the list and the schedule's page show its key and managed_by, and the
edit form of a managed schedule warns, then asks before saving."""

from __future__ import annotations

import pytest
from playwright.async_api import expect

from tests.support.browser import Console, needs_chromium

pytestmark = [needs_chromium, pytest.mark.asyncio(loop_scope="module")]


async def test_a_managed_schedule_shows_its_key_and_warns_before_an_edit(
        console: Console) -> None:
    page = console.page
    created = await console.api("PUT", "/v1/schedules/by-key/billing.nightly", {
        "name": "nightly billing", "cron": "0 3 * * *", "managed_by": "git:acme/schedules",
        "target": {"url": "https://example.com/billing"}})
    try:
        await console.sign_in()
        await expect(page.locator(".schedule-identity")).to_contain_text(
            "key billing.nightly · managed by git:acme/schedules")
        await page.get_by_role("link", name="nightly billing", exact=True).click()
        await expect(page.locator("dl.facts:not(#stats-facts)")).to_contain_text("billing.nightly")
        await expect(page.locator(".managed-by")).to_have_text("git:acme/schedules")
        await page.get_by_role("link", name="Edit").click()
        await expect(page.locator(".managed-warning")).to_contain_text(
            "Managed by git:acme/schedules")
        await page.get_by_label("Name", exact=True).fill("nightly billing (by hand)")
        await page.get_by_role("button", name="Save changes").click()
        dialog = page.get_by_role("dialog")
        await expect(dialog).to_contain_text("its next apply undoes this edit")
        await dialog.get_by_role("button", name="Cancel").click()
        unchanged = await console.api("GET", "/v1/schedules/by-key/billing.nightly")
        assert unchanged["name"] == "nightly billing"
        await page.get_by_role("button", name="Save changes").click()
        await page.get_by_role("dialog").get_by_role("button", name="Save anyway").click()
        await expect(page.locator("h1")).to_contain_text("nightly billing (by hand)")
    finally:
        await console.api("DELETE", f"/v1/schedules/{created['id']}")
    assert console.unexpected_errors() == [] and console.watched.external_requests == []
