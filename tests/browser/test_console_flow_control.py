"""The console's flow control in Debian's chromium against a real `cronwire serve`: a
schedule's key and limits on its page with the key's live state (in flight, waiting, a
Retry-After hold) from GET /v1/flow-control, and the four members in the form."""

from __future__ import annotations

import re

import pytest
from playwright.async_api import expect

from cronwire.harness.sink import Reply, always
from tests.support.browser import Console, needs_chromium

pytestmark = [needs_chromium, pytest.mark.asyncio(loop_scope="module")]



async def test_the_schedule_page_shows_its_keys_limits_and_live_state(console: Console) -> None:
    page, sink = console.page, console.sink
    # Every request takes 1.5 s (under the replica's 2 s delivery timeout) and the key
    # admits one at a time, while the schedule fires every second: runs queue up.
    sink.behaviour = always(Reply(delay=1.5))
    created = await console.api("POST", "/v1/schedules", {
        "name": "paced", "cron": "* * * * * *", "target": {"url": sink.url},
        "flow_control": {"key": "billing-api", "max_concurrency": 1, "rate_per_second": 5}})
    try:
        await console.sign_in()
        await page.get_by_role("link", name="paced", exact=True).click()
        facts = page.locator("#flow-facts")
        await expect(facts).to_contain_text("billing-api")
        await expect(facts).to_contain_text("1 in flight")
        await expect(facts).to_contain_text("5 per second, burst 5 (default)")
        await expect(page.locator("#flow-in-flight")).to_have_text("1 of 1", timeout=60_000)
        await expect(page.locator("#flow-waiting")).to_have_text(
            re.compile(r"^[1-9]\d* due, not started$"), timeout=60_000)
        await expect(page.locator("#flow-held-until")).to_have_text("not held")
        await console.screenshot_of("#flow-control", "flow-control-live.png")

        # The receiver answers 429 with Retry-After: the whole key is held, and the page
        # says until when (within its 2 s refresh).
        sink.behaviour = always(Reply(status=429, retry_after="600"))
        await expect(page.locator("#flow-held-until")).to_contain_text(
            "UTC (the receiver's Retry-After)", timeout=60_000)
        await expect(page.locator("#flow-in-flight")).to_have_text("0 of 1", timeout=60_000)
        listed = await console.api("GET", "/v1/flow-control?key=billing-api")
        assert listed["items"][0]["held_until"] is not None
        await console.screenshot("schedule-flow-control-held.png")
    finally:
        await console.api("DELETE", f"/v1/schedules/{created['id']}")
    assert console.unexpected_errors() == [] and console.watched.external_requests == []


async def test_the_form_edits_flow_control_and_shows_a_refusal_beside_its_field(
    console: Console,
) -> None:
    page = console.page
    created = await console.api("POST", "/v1/schedules", {
        "name": "nightly", "cron": "0 3 * * *", "target": {"url": "https://example.com/n"}})
    await console.sign_in()
    await page.get_by_role("link", name="nightly", exact=True).click()
    await expect(page.locator("#flow-control")).to_contain_text("None: its runs start")

    await page.get_by_role("link", name="Edit nightly").click()
    await page.get_by_label("Flow-control key").fill("partner-api")
    await page.get_by_label("Max concurrency").fill("3")
    await page.get_by_label("Burst").fill("2")  # a burst without a rate: refused by name
    await page.get_by_role("button", name="Save changes").click()
    await expect(page.locator("#f-flow-control-burst-error")).to_contain_text(
        "needs rate_per_second")
    await expect(page.get_by_label("Burst")).to_be_focused()
    await page.get_by_label("Rate per second").fill("0.5")
    await page.get_by_role("button", name="Save changes").click()
    await page.get_by_role("heading", name="nightly", level=1).wait_for()
    facts = page.locator("#flow-facts")
    await expect(facts).to_contain_text("partner-api")
    await expect(facts).to_contain_text("3 in flight")
    await expect(facts).to_contain_text("0.5 per second, burst 2")
    await expect(page.locator("#flow-in-flight")).to_have_text("0 of 3")
    stored = await console.api("GET", f"/v1/schedules/{created['id']}")
    assert stored["flow_control"] == {"key": "partner-api", "max_concurrency": 3,
                                      "rate_per_second": 0.5, "burst": 2}

    # Emptying all four removes flow control.
    await page.get_by_role("link", name="Edit nightly").click()
    for label in ("Flow-control key", "Max concurrency", "Rate per second", "Burst"):
        await page.get_by_label(label).fill("")
    await page.get_by_role("button", name="Save changes").click()
    await page.get_by_role("heading", name="nightly", level=1).wait_for()
    await expect(page.locator("#flow-control")).to_contain_text("None: its runs start")
    stored = await console.api("GET", f"/v1/schedules/{created['id']}")
    assert stored["flow_control"] is None
    assert console.unexpected_errors() == [] and console.watched.external_requests == []
