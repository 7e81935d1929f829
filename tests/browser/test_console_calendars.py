"""Calendars in the console (Debian's chromium against a real `cronwire serve`, ADR 0064):
the Calendars page creates one from dates and one from a country's holidays, edits and
deletes them (the 409 of one in use shown), names as text; the schedule form's calendar
picker and policy; the preview marks the dates a calendar moved or skipped."""

from __future__ import annotations

import pytest
from playwright.async_api import expect

from tests.support.browser import Console, needs_chromium

pytestmark = [needs_chromium, pytest.mark.asyncio(loop_scope="module")]

HOSTILE = '<img src=x onerror="window.__owned=1">'


async def test_calendars_page_picker_and_preview(console: Console) -> None:
    page = console.page
    await console.sign_in()
    await page.get_by_role("link", name="Calendars").click()
    await page.get_by_role("heading", name="Calendars", level=1).wait_for()
    await page.get_by_label("Name").fill("office")
    await page.get_by_label("Dates").fill("2027-12-24\n2027-12-31")
    await page.get_by_role("button", name="Create calendar").click()
    rows = page.locator("table.calendars tbody tr")
    await expect(rows.first).to_contain_text("office")
    await expect(rows.first).to_contain_text("2: 2027-12-24, 2027-12-31")
    # From the holidays package; a bad country is the API's message, named.
    await page.get_by_label("Name").fill(HOSTILE)
    await page.get_by_label("Country (public holidays)").fill("XX")
    await page.get_by_label("Years").fill("2027")
    await page.get_by_role("button", name="Create calendar").click()
    await expect(page.locator("#cal-error")).to_contain_text("holidays.country")
    await page.get_by_label("Country (public holidays)").fill("DE")
    await page.get_by_role("button", name="Create calendar").click()
    await expect(page.locator("table.calendars")).to_contain_text("public holidays of DE, 2027")
    await expect(page.locator("table.calendars")).to_contain_text(HOSTILE)  # as text
    assert await page.evaluate("window.__owned") is None

    # The schedule form: pick "office", move to the next business day.
    await page.get_by_role("link", name="New schedule").first.click()
    await page.get_by_label("Name").fill("fridays")
    await page.get_by_label("Cron expression").fill("0 9 * * FRI")
    await page.get_by_label("Time zone").fill("Europe/Berlin")
    await page.get_by_label("Target URL").fill("https://example.com/fridays")
    await page.get_by_label("Starts at").fill("2027-12-20T00:00:00Z")
    await page.get_by_label("Exclude calendars").select_option(label="office")
    await page.get_by_label("On an excluded date").select_option("next_business_day")
    await page.get_by_role("button", name="Create schedule").click()
    await page.get_by_role("heading", name="fridays", level=1).wait_for()
    facts = page.locator("dl.facts:not(#stats-facts)")
    await expect(facts).to_contain_text("1 excluded; on their dates: next_business_day")
    preview = page.locator("ol.preview li")
    await expect(preview.first).to_contain_text("moved from 2027-12-24 (office)")
    await expect(preview.nth(1)).to_contain_text("moved from 2027-12-31 (office)")
    schedules = await console.api("GET", "/v1/schedules")
    [made] = [s for s in schedules["items"] if s["name"] == "fridays"]
    calendars = {c["name"]: c for c in (await console.api("GET", "/v1/calendars"))["items"]}
    assert made["exclude_calendars"] == [calendars["office"]["id"]]

    # Edit the calendar: the schedule is planned again; deleting it while used is refused.
    await page.get_by_role("link", name="Calendars").click()
    await page.get_by_role("button", name="office", exact=True).click()
    await page.get_by_label("Dates").fill("2027-12-24")
    await page.get_by_role("button", name="Save calendar").click()
    await expect(page.locator("#status")).to_contain_text("1 schedule(s) planned again")
    await page.get_by_role("button", name="Delete office").click()
    await page.get_by_role("button", name="Delete calendar").click()
    await expect(page.locator("#cal-error")).to_contain_text("fridays")
    assert console.watched.external_requests == []
