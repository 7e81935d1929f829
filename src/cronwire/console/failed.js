// Failed runs across every schedule of the tenant (the dead letters), newest first, each
// with its error and a Replay button; "Replay all" replays those not yet replayed in bulk.

import { api } from "./api.js";
import { el, focusHeading } from "./dom.js";
import { announce } from "./feedback.js";
import { utc } from "./format.js";
import { replayButton, runStatus } from "./runs.js";

const PAGE_SIZE = 50;
const BULK_LIMIT = 100;

function row(run, reload) {
  const entry = { run };
  const tr = el("tr", { "data-run-id": run.id },
    el("td", { "data-label": "Scheduled for (UTC)", text: utc(run.scheduled_for) }),
    el("td", { "data-label": "Schedule" },
      el("a", { href: `#/schedules/${run.schedule_id}`, class: "mono", text: run.schedule_id.slice(0, 8) })),
    el("td", { "data-label": "Status" }, ...runStatus(run)),
    el("td", { "data-label": "Attempts", text: String(run.attempt_count) }),
    el("td", { "data-label": "Last error", class: "wrap", text: run.last_error ?? "—" }),
    el("td", { "data-label": "Replay" },
      run.replayed_by ? el("span", { class: "muted", text: `replayed as ${run.replayed_by.slice(0, 8)}` })
        : replayButton(entry, reload)));
  return tr;
}

export async function renderFailedRuns(root) {
  const body = el("tbody");
  const table = el("table", { class: "list failed-runs" },
    el("caption", { class: "visually-hidden", text: "Failed runs, newest first" }),
    el("thead", {}, el("tr", {}, ...["Scheduled for (UTC)", "Schedule", "Status", "Attempts",
      "Last error", "Replay"].map((h) => el("th", { scope: "col", text: h })))),
    body);
  const empty = el("p", { class: "empty muted", text: "No failed runs. Nothing to replay." });
  const error = el("p", { class: "error", role: "alert" });
  const bulk = el("button", { type: "button", text: "Replay all not yet replayed" });
  const older = el("button", { type: "button", class: "secondary", text: "Older runs", hidden: true });
  let cursor = null;

  async function load(append = false) {
    error.textContent = "";
    try {
      const page = await api.listRuns({ status: "failed", limit: PAGE_SIZE,
        cursor: append ? cursor : undefined });
      if (!append) body.replaceChildren();
      body.append(...page.items.map((run) => row(run, () => load())));
      cursor = page.next_cursor;
      older.hidden = !cursor;
    } catch (err) {
      error.textContent = `Could not load failed runs: ${err.message}`;
    }
    table.hidden = body.children.length === 0;
    empty.hidden = body.children.length !== 0;
    bulk.disabled = [...body.querySelectorAll("button.replay")].every((b) => b.hidden);
  }

  bulk.addEventListener("click", async () => {
    bulk.disabled = true;
    try {
      const answer = await api.replayFailed({ limit: BULK_LIMIT });
      announce(answer.replayed ? `Replayed ${answer.replayed} failed runs; they are due now.`
        : "Nothing left to replay.");
      await load();
    } catch (err) {
      announce(`Replay failed: ${err.message}`, "error");
      bulk.disabled = false;
    }
  });
  older.addEventListener("click", () => load(true));
  root.append(el("section", {},
    el("div", { class: "view-head" }, el("h1", { text: "Failed runs" }), bulk),
    el("p", { class: "hint", text: "Runs that failed after their last attempt. A replay is a new "
      + "run, due now, with a new webhook-id; it carries the original occurrence. "
      + `“Replay all” replays up to ${BULK_LIMIT} at a time, oldest first.` }),
    error, el("div", { class: "card" }, el("div", { class: "table-wrap" }, table), empty),
    el("div", { class: "pager" }, older)));
  focusHeading(root);
  await load();
}
