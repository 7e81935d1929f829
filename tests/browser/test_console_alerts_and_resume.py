"""The console's edges in Debian's chromium against a real `cronwire serve`: the
Alerts view (the destination, its secret shown once, the events with their delivery),
alert rules in the schedule form, the warning before a fire_all resume delivers its
missed runs, and one "next fire" on the list and the schedule's page."""

from __future__ import annotations

import asyncio
import re
import time
import uuid
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest
from playwright.async_api import expect

from tests.support.browser import Console, needs_chromium

pytestmark = [needs_chromium, pytest.mark.asyncio(loop_scope="module")]

HOSTILE = '<img src=x onerror="window.__owned=1">'


async def test_the_alerts_view_sets_the_destination_and_lists_delivered_events(
    console: Console,
) -> None:
    page = console.page
    await console.sign_in()
    await page.get_by_role("link", name="Alerts").click()
    await page.get_by_role("heading", name="Alerts", level=1).wait_for()
    await expect(page.locator("#alerts-current")).to_contain_text("No alert destination yet")

    await page.get_by_label("Alert URL").fill(f"{console.sink.url}/alerts")
    await page.get_by_label("failing:", exact=False).check()
    await page.get_by_role("button", name="Save destination").click()
    secret = page.locator("#signing-secret")
    await expect(secret).to_be_visible()
    assert (await secret.input_value()).startswith("whsec_")  # the secret, shown once
    await expect(page.locator("#alerts-current")).to_contain_text(f"{console.sink.url}/alerts")
    await expect(page.locator("#alerts-current")).to_contain_text("schedule.failing")
    assert (await console.api("GET", "/v1/alerts"))["events"] == ["schedule.failing"]

    # A schedule whose every run fails, with its alert rule set in the form; its name is
    # hostile and must show as text.
    await page.get_by_role("link", name="New schedule").first.click()
    await page.get_by_label("Name").fill(HOSTILE)
    await page.get_by_label("Cron expression").fill("* * * * * *")
    await page.get_by_label("Target URL").fill("http://127.0.0.1:1/refused")
    await page.get_by_label("Max attempts").fill("1")
    await page.get_by_label("Alert after failures").fill("1")
    await page.get_by_role("button", name="Create schedule").click()
    await page.get_by_role("heading", name=HOSTILE, level=1).wait_for()
    facts = page.locator("dl.facts:not(#stats-facts)")
    await expect(facts).to_contain_text("failing after 1 failed runs in a row")

    # Edit: the form shows the rule, and a second rule saves.
    await page.get_by_role("link", name=f"Edit {HOSTILE}").click()
    await expect(page.get_by_label("Alert after failures")).to_have_value("1")
    await page.get_by_label("Alert when late (seconds)").fill("300")
    await page.get_by_role("button", name="Save changes").click()
    await expect(page.locator("dl.facts:not(#stats-facts)")).to_contain_text("late after 300 s")

    deadline = time.monotonic() + 60
    row = page.locator("table.alert-events tbody tr")
    while True:
        await page.goto(f"{console.base_url}/console#/schedules")
        await page.get_by_role("link", name="Alerts").click()
        await page.get_by_role("heading", name="Events", level=2).wait_for()
        await page.wait_for_timeout(500)
        if await row.filter(has_text="delivered").count() > 0 or time.monotonic() > deadline:
            break
    first = row.filter(has_text="delivered").first
    await expect(first).to_contain_text("schedule.failing")
    await expect(first.get_by_role("link", name=HOSTILE)).to_be_visible()
    assert await page.evaluate("window.__owned") is None
    assert await page.locator("table.alert-events img").count() == 0
    await console.screenshot("alerts-view.png")
    # GET /v1/alerts answers 404 until a destination is set (the view says so); chromium
    # logs that answer.
    no_destination = re.compile(r"Failed to load resource: .* status of 404")
    assert console.unexpected_errors(no_destination) == []
    assert console.watched.external_requests == []


async def test_resuming_a_fire_all_schedule_says_how_many_runs_it_delivers(
    console: Console, module_pool: asyncpg.Pool,
) -> None:
    page = console.page
    created = await console.api("POST", "/v1/schedules", {
        "name": "minutely", "cron": "* * * * *", "target": {"url": f"{console.sink.url}/m"},
        "misfire_policy": "fire_all", "catchup_window_seconds": 600, "paused": True})
    # As if paused half an hour ago: the planner's cursor was left there.
    since = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=30)
    await module_pool.execute("UPDATE schedule SET next_fire_at = $1 WHERE id = $2", since,
                              uuid.UUID(created["id"]))
    dry = await console.api("POST", f"/v1/schedules/{created['id']}/resume", {"dry_run": True})
    assert dry["runs_due"] >= 10  # the 10-minute window of minutes, the one due now maybe

    await console.sign_in()
    await page.goto(f"{console.base_url}/console#/schedules/{created['id']}")
    await page.get_by_role("heading", name="minutely", level=1).wait_for()
    await page.get_by_role("button", name="Resume minutely").click()
    dialog = page.get_by_role("dialog")
    await expect(dialog).to_contain_text("delivers")
    await expect(dialog).to_contain_text("runs at once")
    await expect(dialog).to_contain_text("fire_all")
    await console.screenshot("resume-warning.png")
    await dialog.get_by_role("button", name="Cancel").click()
    assert (await console.api("GET", f"/v1/schedules/{created['id']}"))["status"] == "paused"

    await page.get_by_role("button", name="Resume minutely").click()
    await page.get_by_role("dialog").get_by_role("button", name="Resume and deliver").click()
    await expect(page.locator("#status")).to_contain_text("runs due now")
    assert (await console.api("GET", f"/v1/schedules/{created['id']}"))["status"] == "active"
    assert console.unexpected_errors() == []


async def test_the_list_and_the_page_show_the_same_next_fire(console: Console) -> None:
    page = console.page
    created = await console.api("POST", "/v1/schedules", {
        "name": "every-minute", "cron": "* * * * *", "target": {"url": f"{console.sink.url}/n"}})
    # Wait until the planner has written the next minute ahead: its cursor (next_fire_at)
    # is then the minute after the next fire, which the list used to show.
    deadline = time.monotonic() + 60
    while True:
        schedule = await console.api("GET", f"/v1/schedules/{created['id']}")
        preview = await console.api("GET", f"/v1/schedules/{created['id']}/preview?count=1")
        ahead = schedule["next_fire_at"] != preview["items"][0]["utc"]
        if ahead or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.5)
    assert ahead, (schedule["next_fire_at"], preview)
    await console.sign_in()
    row = page.locator(f'tr[data-schedule-id="{created["id"]}"]')
    listed = row.locator(".when-utc")
    await expect(listed).not_to_have_text("")
    listed_text = await listed.inner_text()
    await row.get_by_role("link", name="every-minute", exact=True).click()
    detail = page.locator("#next-fire-utc")
    await expect(detail).not_to_have_text("…")
    # The same minute, unless the minute turned between the two reads.
    assert listed_text == await detail.inner_text() or datetime.now(UTC).second < 3
    assert console.unexpected_errors() == []
