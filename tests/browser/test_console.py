"""The tenant console in Debian's chromium against a real `cronwire serve`, real Postgres
and a loopback sink: what a newcomer does after the README's first command."""

from __future__ import annotations

import asyncio
import re

import pytest
from playwright.async_api import expect

from cronwire.harness.sink import Reply, by_attempt
from tests.support.browser import Console, needs_chromium
from tests.support.certificates import Authority
from tests.support.polling import wait_until

pytestmark = [needs_chromium, pytest.mark.asyncio(loop_scope="module")]

# The only console errors allowed are the browser's own notes on the two refusals the test
# provokes on purpose (a wrong token, an invalid cron); anything else fails.
EXPECTED_REFUSALS = re.compile(r"^Failed to load resource: the server responded with a status "
                               r"of (401 \(Unauthorized\)|422 \(Unprocessable (Entity|Content)\))$")
XSS_NAME = "<img src=x onerror=alert(1)>"


def unexpected_errors(console: Console) -> list[str]:
    return [e for e in console.watched.console_errors if not EXPECTED_REFUSALS.match(e)]


async def test_sign_in_create_watch_deliveries_and_manage_a_schedule(console: Console) -> None:
    page, sink = console.page, console.sink
    # The first attempt of each run fails (503), the retry succeeds: both show as evidence.
    sink.behaviour = by_attempt({1: Reply(status=503, body=b'{"error": "warming up"}')},
                                Reply(status=200, body=b'{"ok": true}'))
    await console.api("POST", "/v1/schedules", {
        "name": "nightly-report", "cron": "30 2 * * *", "timezone": "Europe/Berlin",
        "target": {"url": "https://example.com/hooks/report"}})
    await console.api("POST", "/v1/schedules", {
        "name": "invoice-sync", "cron": "*/15 * * * *", "timezone": "America/New_York",
        "target": {"url": "https://example.com/hooks/invoices"}, "paused": True})

    response = await page.goto(f"{console.base_url}/console")
    assert response is not None and response.status == 200
    csp = response.headers["content-security-policy"]
    assert "default-src 'self'" in csp and "script-src 'self';" in csp and "unsafe" not in csp

    # A wrong token: one line, nothing stored.
    await page.get_by_label("API token").fill("cwt_not-a-real-token")
    await page.get_by_role("button", name="Sign in").click()
    await expect(page.locator("#api-token-error")).to_have_text(
        "That token was not accepted: it is unknown or revoked.")
    assert await page.evaluate("sessionStorage.length") == 0

    # By keyboard: the field has focus again after the error; Enter submits.
    await expect(page.get_by_label("API token")).to_be_focused()
    await page.keyboard.press("Control+a")
    await page.keyboard.type(console.token)
    await page.keyboard.press("Enter")
    await page.get_by_role("heading", name="Schedules", level=1).wait_for()
    assert await page.evaluate("sessionStorage.getItem('cronwire.console.token')") == console.token
    assert await page.evaluate("document.cookie") == ""
    assert console.token not in page.url
    await expect(page.locator("tr[data-schedule-id]")).to_have_count(2)

    # Create through the form: the 422 for the cron lands beside the cron field.
    await page.get_by_role("link", name="New schedule").first.click()
    await page.get_by_label("Name").fill("heartbeat")
    await page.get_by_label("Cron expression").fill("61 * * * * *")
    await page.get_by_label("Target URL").fill(sink.url)
    await page.get_by_label("Initial backoff (seconds)").fill("0.2")
    await page.get_by_label("Max backoff (seconds)").fill("0.5")
    await page.get_by_role("button", name="Create schedule").click()
    cron_error = page.locator("#f-cron-error")
    await expect(cron_error).to_be_visible()
    await expect(cron_error).to_contain_text("61")
    await expect(page.get_by_label("Cron expression")).to_have_attribute("aria-invalid", "true")
    await expect(page.get_by_label("Cron expression")).to_be_focused()
    await console.screenshot("form-422.png")

    await page.get_by_label("Cron expression").fill("* * * * * *")
    await page.get_by_role("button", name="Create schedule").click()
    await page.get_by_role("heading", name="heartbeat", level=1).wait_for()
    secret = page.locator("#signing-secret")
    assert (await secret.input_value()).startswith("whsec_")
    await page.get_by_role("button", name="Copy").click()
    await expect(page.locator(".copied")).to_have_text("Copied.")
    assert await page.evaluate("navigator.clipboard.readText()") == await secret.input_value()
    await expect(page.locator("ol.preview li")).to_have_count(10)

    # Deliveries arrive in the history by themselves (live refresh), with the chart.
    await sink.wait_for(lambda s: s.unique >= 2, within=30)
    succeeded = page.locator("tr[data-run-id] .badge.s-succeeded")
    await expect(succeeded.nth(1)).to_be_visible(timeout=20_000)
    await expect(page.locator("svg.chart circle.s-succeeded").first).to_be_attached()

    # A run's attempts: the failed first try and the successful retry, with their evidence.
    finished = page.locator("tr[data-run-id]", has=page.locator(".badge.s-succeeded")).first
    await finished.get_by_role("button", name=re.compile("^Attempts of the run")).click()
    attempts = page.locator("table.attempts tbody tr")
    await expect(attempts).to_have_count(2)
    await expect(attempts.nth(0)).to_contain_text("503")
    await expect(attempts.nth(0)).to_contain_text("warming up")
    await expect(attempts.nth(1)).to_contain_text("200")
    await expect(attempts.nth(1).locator("pre.excerpt")).to_have_text('{"ok": true}')
    await console.screenshot("run-attempts.png")
    await console.screenshot_of(".runs-card", "runs-section.png")

    # Filters: no failed run; back to any status.
    await page.get_by_label("Status", exact=True).select_option("failed")
    await expect(page.get_by_text("No runs match.")).to_be_visible()
    await page.get_by_label("Status", exact=True).select_option("")
    await expect(succeeded.first).to_be_visible()
    await page.get_by_label("Time window").select_option("900")
    await expect(succeeded.first).to_be_visible()
    await page.get_by_label("Time window").select_option("custom")
    await page.get_by_label("From (UTC)").fill("2027-01-02T00:00:00")
    await page.get_by_label("To (UTC)").fill("2027-01-01T00:00:00")
    await expect(page.locator("#runs-until-error")).to_have_text("until: must be later than since")
    await page.get_by_label("Time window").select_option("")
    await expect(succeeded.first).to_be_visible()

    # Pause, resume, trigger now.
    await page.get_by_role("button", name="Pause heartbeat").click()
    await expect(page.get_by_label("Note (optional)")).to_be_focused()
    await page.get_by_role("dialog").get_by_role("button", name="Pause schedule").click()
    await expect(page.locator("dl.facts .state-paused")).to_have_text("paused")
    await page.get_by_role("button", name="Resume heartbeat").click()
    await expect(page.locator("dl.facts .state-active")).to_have_text("active")
    await page.get_by_role("button", name="Trigger now heartbeat").click()
    await expect(page.locator("#status")).to_contain_text("Triggered heartbeat")
    await expect(page.locator("tr[data-run-id]", has_text="manual").first).to_be_visible()

    # The list at desktop width (README screenshot), then at phone width.
    await page.get_by_role("link", name="Schedules").first.click()
    await page.reload()  # a fresh page for the picture: no status line from the steps above
    await expect(page.locator("tr[data-schedule-id]")).to_have_count(3)
    await expect(page.locator("tr[data-schedule-id]", has_text="heartbeat")
                 .locator("td[data-label='Last run'] .badge")).to_be_visible()
    await console.screenshot("schedules.png")
    await page.set_viewport_size({"width": 390, "height": 844})
    assert await page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    await console.screenshot("schedules-phone.png")
    await page.get_by_role("link", name="heartbeat", exact=True).click()
    await expect(page.locator("tr[data-run-id]").first).to_be_visible()
    assert await page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    await console.screenshot("schedule-phone.png")
    await page.set_viewport_size({"width": 1280, "height": 900})
    await page.get_by_role("link", name="Schedules").first.click()

    # Delete asks first; cancelling keeps it, confirming removes it.
    row = page.locator("tr[data-schedule-id]", has_text="heartbeat")
    await row.get_by_role("button", name="Delete heartbeat").click()
    await expect(page.get_by_role("dialog").get_by_role("button", name="Cancel")).to_be_focused()
    await page.keyboard.press("Escape")
    await expect(page.get_by_role("dialog")).to_have_count(0)
    await expect(row).to_have_count(1)
    await row.get_by_role("button", name="Delete heartbeat").click()
    await page.get_by_role("dialog").get_by_role("button", name="Delete schedule").click()
    await expect(row).to_have_count(0)
    await expect(page.locator("#status")).to_have_text("Deleted heartbeat.")

    await page.get_by_role("button", name="Sign out").click()
    await expect(page.get_by_label("API token")).to_be_visible()
    assert await page.evaluate("sessionStorage.length") == 0

    assert unexpected_errors(console) == []
    refusals = [e.split(" of ")[1][:3] for e in console.watched.console_errors]
    assert refusals.count("401") == 1 and refusals.count("422") >= 2  # the provoked ones
    assert console.watched.dialogs == []
    assert console.watched.external_requests == []


async def test_tenant_text_is_rendered_as_text(console: Console) -> None:
    page = console.page
    created = await console.api("POST", "/v1/schedules", {
        "name": XSS_NAME, "cron": "0 3 * * *", "timezone": "UTC",
        "target": {"url": "https://example.com/<script>alert(2)</script>",
                   "headers": {"x-note": "<b onmouseover=alert(3)>"}}})
    # 20 more: the list's first page (20) is full and the XSS schedule is on the next.
    await asyncio.gather(*(console.api("POST", "/v1/schedules", {
        "name": f"bulk-{n:02}", "cron": "0 4 * * *", "target": {"url": "https://example.com/b"}})
        for n in range(20)))
    await console.sign_in()
    rows = page.locator("tr[data-schedule-id]")
    await expect(rows).to_have_count(20)
    await expect(page.get_by_role("button", name="Previous page")).to_be_disabled()
    names = page.locator("tr[data-schedule-id] td[data-label='Name']")
    first_page = await names.all_inner_texts()
    await page.get_by_role("button", name="Next page").click()
    await expect(rows).to_have_count(1)
    await expect(page.get_by_role("button", name="Next page")).to_be_disabled()
    await page.get_by_role("button", name="Previous page").click()
    await expect(rows).to_have_count(20)
    assert await names.all_inner_texts() == first_page
    if await page.get_by_role("link", name=XSS_NAME, exact=True).count() == 0:
        await page.get_by_role("button", name="Next page").click()
    link = page.get_by_role("link", name=XSS_NAME, exact=True)
    await expect(link).to_have_text(XSS_NAME)
    await link.click()
    await expect(page.get_by_role("heading", level=1)).to_have_text(XSS_NAME)
    await expect(page.locator("dl.facts:not(#stats-facts)")).to_contain_text("<script>alert(2)</script>")
    await page.get_by_role("link", name=f"Edit {XSS_NAME}").click()
    await expect(page.get_by_label("Name")).to_have_value(XSS_NAME)
    # Header values read as *** (sealed secrets): the tenant's text never reaches the form.
    await expect(page.get_by_label("Headers")).to_have_value("x-note: ***")
    assert await page.locator("main img, main script, main b").count() == 0
    assert created["name"] == XSS_NAME
    assert console.watched.dialogs == []
    assert console.watched.console_errors == []
    assert console.watched.external_requests == []


async def test_api_docs_render_offline(console: Console) -> None:
    page = console.page
    response = await page.goto(f"{console.base_url}/docs")
    assert response is not None and response.status == 200
    assert "script-src 'self';" in response.headers["content-security-policy"]
    assert re.search(r"<script>|<script [^>]*(?<!\.js\")>", await response.text()) is None
    await expect(page.locator(".opblock-summary-path", has_text="/v1/schedules/{id}/preview")
                 ).to_be_visible()
    await expect(page.locator('.opblock-summary-path[data-path="/v1/runs/{id}"]')).to_be_visible()
    await console.screenshot("docs.png", full_page=False)

    response = await page.goto(f"{console.base_url}/redoc")
    assert response is not None and response.status == 200
    await expect(page.get_by_role("heading", name="List schedules (keyset pages by id)")).to_be_visible()
    await expect(page.get_by_role("heading", name="One run with its delivery attempts")).to_be_attached()
    await console.screenshot("redoc.png", full_page=False)

    # ReDoc 2 renders an <img> of its logo from its CDN; served with that image inline, the
    # page asks for nothing outside this origin: no request, no CSP refusal.
    await expect(page.locator("img[alt='redocly logo']")).to_be_attached()
    assert console.watched.console_errors == []
    assert console.watched.external_requests == []


async def test_preview_marks_dst_changes_and_the_form_edits(console: Console) -> None:
    page = console.page
    created = await console.api("POST", "/v1/schedules", {
        "name": "berlin-hourly", "cron": "0 * * * *", "timezone": "Europe/Berlin",
        "starts_at": "2027-03-28T00:00:00Z", "target": {"url": "https://example.com/h"}})
    await console.sign_in()
    await page.get_by_role("link", name="berlin-hourly", exact=True).click()
    # 00:00Z is 01:00 CET; 01:00Z is 03:00 CEST: the second fire is the first after the change.
    items = page.locator("ol.preview li")
    await expect(items).to_have_count(10)
    await expect(items.nth(1).locator(".dst-mark")).to_have_text("DST: UTC+01:00 → UTC+02:00")
    await expect(items.nth(1)).to_contain_text("2027-03-28 03:00:00 +02:00")
    await expect(page.locator("ol.preview .dst-mark")).to_have_count(1)

    await page.get_by_role("link", name="Edit berlin-hourly").click()
    await page.get_by_label("Name").fill("berlin-hourly-2")
    await page.get_by_label("Max attempts").fill("9")
    await page.get_by_role("button", name="Save changes").click()
    await expect(page.locator("#f-retry-max-attempts-error")).to_be_visible()
    await page.get_by_label("Max attempts").fill("4")
    await page.get_by_role("button", name="Save changes").click()
    await expect(page.get_by_role("heading", level=1)).to_have_text("berlin-hourly-2")
    saved = await console.api("GET", f"/v1/schedules/{created['id']}")
    assert saved["name"] == "berlin-hourly-2" and saved["retry"]["max_attempts"] == 4
    assert saved["cron"] == "0 * * * *" and saved["starts_at"] == created["starts_at"]

    # A token that stops working (revoked) signs the tab out with one line.
    await page.evaluate("sessionStorage.setItem('cronwire.console.token', 'cwt_revoked')")
    await page.get_by_role("link", name="Schedules").first.click()
    await expect(page.get_by_label("API token")).to_be_visible()
    await expect(page.locator("#status")).to_have_text(
        "Your token is no longer accepted; sign in again.")
    assert await page.evaluate("sessionStorage.length") == 0
    assert unexpected_errors(console) == []
    assert console.watched.dialogs == [] and console.watched.external_requests == []


async def test_the_edit_form_keeps_masked_header_values_and_removes_deleted_lines(
    console: Console,
) -> None:
    """Sealed headers (ADR 0061): reads show header values as ***; saving the form with a *** line keeps
    that header's stored value, a deleted line removes its header, a new line adds one."""
    page, sink = console.page, console.sink
    created = await console.api("POST", "/v1/schedules", {
        "name": "masked-headers", "cron": "0 3 1 1 *", "target": {
            "url": sink.url, "headers": {"Authorization": "Bearer keep-me", "X-A": "1"}}})
    await console.sign_in()
    await page.get_by_role("link", name="masked-headers", exact=True).click()
    await page.get_by_role("link", name="Edit masked-headers").click()
    headers = page.get_by_label("Headers")
    await expect(headers).not_to_have_value("")
    assert sorted((await headers.input_value()).split("\n")) == ["Authorization: ***",
                                                                   "X-A: ***"]
    await headers.fill("Authorization: ***\nX-B: 2")
    await page.get_by_role("button", name="Save changes").click()
    await expect(page.get_by_role("heading", level=1)).to_have_text("masked-headers")
    saved = await console.api("GET", f"/v1/schedules/{created['id']}")
    assert saved["target"]["headers"] == {"Authorization": "***", "X-B": "***"}
    await console.api("POST", f"/v1/schedules/{created['id']}/trigger")
    await sink.wait_for(lambda s: any(
        a.headers.get("x-cronwire-schedule-id") == created["id"] for a in s.arrivals), 30)
    [arrival] = [a for a in sink.arrivals
                 if a.headers.get("x-cronwire-schedule-id") == created["id"]]
    assert arrival.headers["Authorization"] == "Bearer keep-me"
    assert arrival.headers["X-B"] == "2" and "X-A" not in arrival.headers
    assert unexpected_errors(console) == []


async def test_runs_stay_newest_first_while_they_arrive_and_outlive_their_schedule(
    console: Console,
) -> None:
    """Found by a first user: with live refresh on, new pending rows landed between older ones; "Next
    fire" disagreed with the preview; a deleted schedule's history was out of reach."""
    page, sink = console.page, console.sink
    created = await console.api("POST", "/v1/schedules", {
        "name": "every-second", "cron": "* * * * * *", "target": {"url": sink.url}})
    await console.sign_in()
    await page.get_by_role("link", name="every-second", exact=True).click()
    await expect(page.locator("ol.preview li")).to_have_count(10)
    first_fire = await page.locator("ol.preview li .utc").first.inner_text()
    await expect(page.locator("#next-fire-utc")).to_have_text(first_fire)
    await expect(page.locator("dl.facts:not(#stats-facts)").first).to_contain_text(
        "Planned up to (UTC)")

    when = page.locator("tr[data-run-id] td[data-label='Scheduled for (UTC)']")
    await expect(when.first).to_be_visible(timeout=30_000)
    # Live refresh every 2 s, each adding the planner's new runs: once 8 more rows came,
    # several refreshes have added rows on top of rows added by refreshes before them.
    at_first = await when.count()
    await page.wait_for_function(
        "n => document.querySelectorAll('tr[data-run-id]').length >= n", arg=at_first + 8,
        timeout=90_000)
    shown = await when.all_inner_texts()
    assert shown == sorted(shown, reverse=True), shown

    headers = await page.locator("table.runs thead th").all_inner_texts()
    assert "Run time" in headers and "Duration" not in headers
    await expect(page.locator(".runs-card")).to_contain_text("Run time: from the first attempt")
    done = page.locator("tr[data-run-id]", has=page.locator(".badge.s-succeeded")).first
    await expect(done).to_be_visible(timeout=30_000)
    await done.get_by_role("button", name=re.compile("^Attempts of the run")).click()
    await expect(page.locator("table.attempts thead th").first).to_be_visible()
    attempt_headers = await page.locator("table.attempts thead th").all_inner_texts()
    assert "Request time" in attempt_headers
    await expect(page.locator(".run-detail:not([hidden])")).to_contain_text(
        "Request time: this attempt alone")

    await console.api("DELETE", f"/v1/schedules/{created['id']}")
    await page.reload()
    await expect(page.get_by_role("heading", name="Deleted schedule", level=1)).to_be_visible()
    await expect(page.locator("tr[data-run-id]").first).to_be_visible()
    assert unexpected_errors(console) == [f for f in unexpected_errors(console)
                                          if "404 (Not Found)" in f]  # the schedule's own 404
    assert console.watched.external_requests == []


async def test_schedule_page_shows_stats_and_explains_an_instant(console: Console) -> None:
    page = console.page
    created = await console.api("POST", "/v1/schedules", {
        "name": "wall-clock-0230", "cron": "30 2 * * *", "timezone": "Europe/Berlin",
        "target": {"url": console.sink.url}})
    run = await console.api("POST", f"/v1/schedules/{created['id']}/trigger")

    async def delivered() -> bool:
        found = await console.api("GET", f"/v1/runs/{run['id']}")
        return bool(found["status"] == "succeeded")

    await wait_until(delivered, within=60)
    await console.sign_in()
    await page.get_by_role("link", name="wall-clock-0230", exact=True).click()
    stats = page.locator("#stats-facts")
    await expect(stats).to_contain_text("Succeeded1")
    await expect(stats).to_contain_text("Success rate100.0 %")
    await expect(stats).to_contain_text("0 overlap, 0 misfire")
    await page.get_by_label("Stats window").select_option("1h")
    await expect(stats).to_contain_text("Runs1")

    # 01:00 CET on the spring-forward day: 02:30 does not exist, 03:00 CEST fires instead.
    await page.get_by_role("textbox", name="Instant").fill("2027-03-28T00:00:00Z")
    await page.get_by_role("button", name="Explain").click()
    result = page.locator("#explain-result")
    await expect(result.locator(".badge")).to_have_text("not_planned_yet")
    await expect(result).to_contain_text("DST moved it: 02:30 did not exist on 2027-03-28")
    await expect(result).to_contain_text("2027-03-28 01:00:00")
    await page.get_by_role("textbox", name="Instant").fill("next tuesday")
    await page.get_by_role("button", name="Explain").click()
    await expect(result.locator(".error")).to_contain_text("at")
    assert [e for e in unexpected_errors(console) if "422" not in e] == []
    assert console.watched.external_requests == []


async def test_the_edit_form_sets_shows_and_removes_a_client_certificate(
    console: Console,
) -> None:
    """mTLS (ADR 0061): the form takes a certificate and key, shows the stored one's subject
    and expiry beside the write-only field, keeps it when another field is saved, and the
    remove box removes it; a key without its certificate names the field."""
    page = console.page
    created = await console.api("POST", "/v1/schedules", {
        "name": "mtls-form", "cron": "0 3 1 1 *", "target": {"url": "https://example.com/h"}})
    pem = Authority().client_tls("form-client")
    await console.sign_in()
    await page.get_by_role("link", name="mtls-form", exact=True).click()
    await page.get_by_role("link", name="Edit mtls-form").click()
    await page.get_by_label("Client key (PEM)").fill(pem["client_key"])
    await page.get_by_role("button", name="Save changes").click()
    await expect(page.locator("#f-target-tls-client-certificate-error")).to_be_visible()
    await page.get_by_label("Client certificate (PEM)").fill(pem["client_certificate"])
    await page.get_by_role("button", name="Save changes").click()
    await expect(page.get_by_role("heading", level=1)).to_have_text("mtls-form")
    saved = await console.api("GET", f"/v1/schedules/{created['id']}")
    assert saved["target"]["tls"]["client_certificate_subject"] == "CN=form-client"

    await page.get_by_role("link", name="Edit mtls-form").click()
    await expect(page.locator("#f-target-tls-client-certificate-hint")).to_contain_text(
        "Current: CN=form-client")
    await page.get_by_label("Name").fill("mtls-form-2")
    await page.get_by_role("button", name="Save changes").click()
    await expect(page.get_by_role("heading", level=1)).to_have_text("mtls-form-2")
    kept = await console.api("GET", f"/v1/schedules/{created['id']}")
    assert kept["target"]["tls"] == saved["target"]["tls"]

    await page.get_by_role("link", name="Edit mtls-form-2").click()
    await page.get_by_label("Remove the client certificate").check()
    await page.get_by_role("button", name="Save changes").click()
    await expect(page.get_by_role("heading", level=1)).to_have_text("mtls-form-2")
    removed = await console.api("GET", f"/v1/schedules/{created['id']}")
    assert removed["target"]["tls"] is None
    assert unexpected_errors(console) == []
