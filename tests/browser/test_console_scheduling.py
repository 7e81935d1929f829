"""The console's scheduling semantics in Debian's chromium against a real `cronwire serve`:
the new schedule fields in the form, a pause note, the backfill dialog with its dry run,
skip reasons in the run history, and the failed-runs view with replay."""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest
from playwright.async_api import expect

from cronwire.harness.sink import Reply, always
from tests.support.browser import Console, needs_chromium

pytestmark = [needs_chromium, pytest.mark.asyncio(loop_scope="module")]



def local_input(moment: datetime) -> str:
    """A datetime-local value in UTC, as the dialog reads it."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S")


async def test_the_form_sets_the_new_fields_and_the_page_shows_them(console: Console) -> None:
    page = console.page
    await console.sign_in()
    await page.get_by_role("link", name="New schedule").first.click()
    await page.get_by_label("Name").fill("guarded")
    await page.get_by_label("Cron expression").fill("*/5 * * * *")
    await page.get_by_label("Target URL").fill("https://example.com/guarded")
    await page.get_by_label("Overlap policy").select_option("buffer_one")
    await page.get_by_label("Jitter (seconds)").fill("4000")
    await page.get_by_label("Max runs").fill("10")
    await page.get_by_label("Pause after failures").fill("3")
    await page.get_by_role("button", name="Create schedule").click()
    jitter_error = page.locator("#f-jitter-seconds-error")
    await expect(jitter_error).to_contain_text("between 0 and 3600")
    await expect(page.get_by_label("Jitter (seconds)")).to_be_focused()
    await page.get_by_label("Jitter (seconds)").fill("30")
    await page.get_by_role("button", name="Create schedule").click()
    await page.get_by_role("heading", name="guarded", level=1).wait_for()
    facts = page.locator("dl.facts:not(#stats-facts)")
    await expect(facts).to_contain_text("buffer_one")
    await expect(facts).to_contain_text("up to 30 s")
    # 0 or 1: the planner may already have planned the next */5 occurrence (it did, at
    # 15:59:5x, once), and the page shows the count it finds.
    await expect(facts).to_contain_text(re.compile(r"Max runs[01] of 10 planned"))
    await expect(facts).to_contain_text("after 3 failed runs in a row (0 now)")

    # A one-time schedule: "Run once at" instead of a cron; both at once is refused.
    await page.get_by_role("link", name="New schedule").first.click()
    await page.get_by_label("Name").fill("once")
    await page.get_by_label("Cron expression").fill("0 3 * * *")
    await page.get_by_label("Run once at").fill("2031-01-01T09:00:00Z")
    await page.get_by_label("Target URL").fill("https://example.com/once")
    await page.get_by_role("button", name="Create schedule").click()
    await expect(page.locator("#f-at-error")).to_contain_text("not cron and at")
    await page.get_by_label("Cron expression").fill("")
    await page.get_by_role("button", name="Create schedule").click()
    await page.get_by_role("heading", name="once", level=1).wait_for()
    await expect(page.locator("dl.facts:not(#stats-facts)")).to_contain_text("Runs once at")
    await expect(page.locator("dl.facts:not(#stats-facts)")).to_contain_text("2031-01-01 09:00:00 UTC")
    await expect(page.locator("ol.preview li")).to_have_count(1)

    # Pause with a note: the page says why it is paused.
    await page.get_by_role("button", name="Pause once").click()
    await page.get_by_label("Note (optional)").fill("waiting for the vendor, ticket 42")
    await page.keyboard.press("Enter")
    await expect(page.locator("dl.facts .state-paused")).to_have_text("paused")
    await expect(page.locator(".paused-reason")).to_have_text("waiting for the vendor, ticket 42")
    await console.screenshot("schedule-paused-note.png")
    assert console.unexpected_errors() == [] and console.watched.external_requests == []


async def test_backfill_previews_then_writes_and_the_runs_show_it(
    console: Console, module_pool: asyncpg.Pool,
) -> None:
    page = console.page
    created = await console.api("POST", "/v1/schedules", {
        "name": "hourly-report", "cron": "0 * * * *", "timezone": "UTC", "paused": True,
        "target": {"url": "https://example.com/report"}})
    now = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    start, end = now - timedelta(hours=7), now - timedelta(hours=1)
    await console.sign_in()
    await page.get_by_role("link", name="hourly-report", exact=True).click()
    await page.get_by_role("button", name="Backfill hourly-report").click()
    dialog = page.get_by_role("dialog")
    await expect(dialog.get_by_label("Start (UTC, inclusive)")).to_be_focused()
    # End before start: the API's 422 lands beside the end field.
    await dialog.get_by_label("Start (UTC, inclusive)").fill(local_input(end))
    await dialog.get_by_label("End (UTC, exclusive)").fill(local_input(start))
    await dialog.get_by_role("button", name="Preview (dry run)").click()
    await expect(page.locator("#backfill-end-error")).to_contain_text("later than start")
    await dialog.get_by_label("Start (UTC, inclusive)").fill(local_input(start))
    await dialog.get_by_label("End (UTC, exclusive)").fill(local_input(end))
    await dialog.get_by_role("button", name="Preview (dry run)").click()
    await expect(page.locator(".backfill-summary")).to_have_text(
        "6 occurrences: would create 6 runs; 0 already had one.")
    await expect(page.locator("ol.backfill-first li")).to_have_count(6)
    assert "null" not in await dialog.inner_text()
    await expect(page.locator("ol.backfill-first li").first).to_have_text(
        start.strftime("%Y-%m-%d %H:%M:%S UTC"))
    assert await module_pool.fetchval("SELECT count(*) FROM job_run WHERE schedule_id = $1",
                                      uuid.UUID(created["id"])) == 0  # a dry run writes nothing
    await console.screenshot("backfill-preview.png")
    await dialog.get_by_role("button", name="Create runs").click()
    await expect(page.locator(".backfill-summary")).to_have_text(
        "6 occurrences: created 6 runs; 0 already had one.")
    await dialog.get_by_role("button", name="Close").click()
    await expect(page.locator("#status")).to_contain_text("6 runs created")
    await expect(page.locator("tr[data-run-id]", has_text="backfill")).to_have_count(6)
    assert "null" not in await page.locator("table.runs").inner_text()
    assert console.unexpected_errors() == [] and console.watched.dialogs == []


async def test_skip_reasons_show_and_failed_runs_replay(
    console: Console, module_pool: asyncpg.Pool,
) -> None:
    page, sink = console.page, console.sink
    sink.behaviour = always(Reply(status=500, body=b"down"))
    created = await console.api("POST", "/v1/schedules", {
        "name": "flaky", "cron": "0 3 * * *", "timezone": "UTC", "target": {"url": sink.url},
        "retry": {"max_attempts": 1}})
    sid = uuid.UUID(created["id"])
    skipped_at = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=2)
    await module_pool.execute(
        "INSERT INTO job_run (id, tenant_id, schedule_id, scheduled_for, idempotency_key, "
        "status, fire_after, finished_at, skip_reason) VALUES ($1, $2, $3, $4, 'k-skip', "
        "'skipped', $4, now(), 'overlap')",
        uuid.uuid4(), uuid.UUID(console.tenant_id), sid, skipped_at)
    for _ in range(2):
        await console.api("POST", f"/v1/schedules/{sid}/trigger")
    await sink.wait_for(lambda s: len(s.arrivals) >= 2, within=30)
    await console.sign_in()
    await page.get_by_role("link", name="flaky", exact=True).click()
    skipped = page.locator("tr[data-run-id]", has=page.locator(".badge.s-skipped"))
    await expect(skipped.locator(".skip-reason")).to_have_text("overlap")
    await expect(page.locator("tr[data-run-id] .badge.s-failed")).to_have_count(2)

    # The failed-runs view: replay one, then the rest in bulk.
    sink.behaviour = always(Reply(status=200))
    await page.get_by_role("link", name="Failed runs").click()
    await page.get_by_role("heading", name="Failed runs", level=1).wait_for()
    rows = page.locator("table.failed-runs tr[data-run-id]")
    await expect(rows).to_have_count(2)
    await expect(rows.first).to_contain_text("HTTPStatus: 500")
    await console.screenshot("failed-runs.png")
    await rows.first.get_by_role("button", name=re.compile("^Replay the run at")).click()
    await expect(page.locator("#status")).to_contain_text("Replayed: run")
    await expect(rows.first).to_contain_text("replayed as")
    await page.get_by_role("button", name="Replay all not yet replayed").click()
    await expect(page.locator("#status")).to_have_text("Replayed 1 failed runs; they are due now.")
    await sink.wait_for(lambda s: s.unique >= 2, within=30)
    replays = await module_pool.fetch(
        "SELECT replay_of FROM job_run WHERE trigger = 'replay' AND schedule_id = $1", sid)
    assert len(replays) == 2
    assert console.unexpected_errors() == [] and console.watched.dialogs == []


async def test_the_form_takes_an_rfc_5545_rule_and_the_page_previews_it(console: Console) -> None:
    page = console.page
    await console.sign_in()
    await page.get_by_role("link", name="New schedule").first.click()
    await page.get_by_label("Name").fill("last-workday")
    await page.get_by_label("RFC 5545 rule").fill(
        "DTSTART:20270101T090000\nRRULE:FREQ=MONTHLY;BYDAY=MO,TU,WE,TH,FR;BYSETPOS=-1")
    await page.get_by_label("Target URL").fill("https://example.com/month-end")
    await page.get_by_role("button", name="Create schedule").click()
    await page.get_by_role("heading", name="last-workday", level=1).wait_for()
    facts = page.locator("dl.facts:not(#stats-facts)")
    await expect(facts).to_contain_text("BYSETPOS=-1")
    # the preview lists the rule's fires, at 09:00 in the schedule's zone (UTC)
    preview = page.locator("ol.preview li").first
    await expect(preview).to_contain_text("09:00")
