// A schedule's runs, newest first: filters, "older" paging with the API cursor, live
// refresh of the newest page, each run's attempts, and the outcome/lag chart.

import { api } from "./api.js";
import { renderChart } from "./chart.js";
import { el, statusBadge } from "./dom.js";
import { announce } from "./feedback.js";
import { duration, fireLagMs, parseTime, runDurationMs, utc, utcInputToRfc3339 } from "./format.js";

const STATUSES = ["pending", "running", "retrying", "succeeded", "failed", "skipped", "cancelled"];
const WINDOWS = [
  ["", "Any time"], ["900", "Last 15 minutes"], ["3600", "Last hour"],
  ["86400", "Last 24 hours"], ["604800", "Last 7 days"], ["custom", "Custom range (UTC)"],
];
const PAGE_SIZE = 50;
// What the two durations measure (a run of one attempt shows both, and they differ).
const RUN_TIME_HINT = "Run time: from the first attempt's start to the run's end, recorded "
  + "(every attempt, the backoff between them, and writing the outcome). Fire lag: from the "
  + "scheduled time to the first attempt's start.";
const REQUEST_TIME_HINT = "Request time: this attempt alone, from resolving and connecting to "
  + "the target to the end of its answer (or the error).";
const LIVE_EVERY_MS = 2000;

function select(id, options) {
  return el("select", { id }, ...options.map(([value, text]) => el("option", { value, text })));
}

/** Newest first, as the API orders them: scheduled_for, then id. */
function newer(a, b) {
  const ta = parseTime(a.scheduled_for);
  const tb = parseTime(b.scheduled_for);
  return ta !== tb ? ta > tb : a.id > b.id;
}

function attemptsTable(detail) {
  if (detail.attempts.length === 0) {
    return el("p", { class: "muted", text: "No attempt yet." });
  }
  const head = ["Attempt", "Started (UTC)", "Outcome", "Status code", "Request time", "Error", "Response excerpt"];
  return el("div", {}, el("table", { class: "list attempts" },
    el("caption", { text: `Attempts of the run scheduled for ${utc(detail.scheduled_for, { millis: true })}` }),
    el("thead", {}, el("tr", {}, ...head.map((h) => el("th", { scope: "col", text: h })))),
    el("tbody", {}, ...detail.attempts.map((a) => el("tr", {},
      el("td", { "data-label": "Attempt", text: String(a.attempt) }),
      el("td", { "data-label": "Started (UTC)", text: utc(a.started_at, { millis: true }) }),
      el("td", { "data-label": "Outcome" }, el("span", { class: `badge o-${a.outcome}`, text: a.outcome })),
      el("td", { "data-label": "Status code", text: a.status_code ?? "—" }),
      el("td", { "data-label": "Request time", text: duration(a.duration_ms) }),
      el("td", { "data-label": "Error", text: a.error ?? "—" }),
      el("td", { "data-label": "Response excerpt" },
        a.response_excerpt ? el("pre", { class: "excerpt", text: a.response_excerpt }) : "—"),
    )))), el("p", { class: "hint", text: REQUEST_TIME_HINT }));
}

/** The status badge, and why a skipped run was skipped (overlap, misfire). */
export function runStatus(run) {
  const badge = statusBadge(run.status);
  return run.skip_reason ? [badge, el("span", { class: "skip-reason", text: run.skip_reason })]
    : [badge];
}

/** "Replay" on a failed run not yet replayed; hidden otherwise. ``after()`` on success. */
export function replayButton(entry, after) {
  const button = el("button", { type: "button", class: "small replay",
    "aria-label": `Replay the run at ${utc(entry.run.scheduled_for)}`, text: "Replay" });
  const sync = () => {
    button.hidden = entry.run.status !== "failed" || Boolean(entry.run.replayed_by);
  };
  sync();
  entry.syncReplay = sync;
  button.addEventListener("click", async () => {
    button.disabled = true;
    try {
      const replay = await api.replay(entry.run.id);
      entry.run = { ...entry.run, replayed_by: replay.id };
      sync();
      announce(`Replayed: run ${replay.id} is due now.`);
      after(replay);
    } catch (err) {
      announce(`Replay failed: ${err.message}`, "error");
    } finally {
      button.disabled = false;
    }
  });
  return button;
}

export function renderRuns(parent, schedule, { onCleanup }) {
  const status = select("runs-status", [["", "Any status"], ...STATUSES.map((s) => [s, s])]);
  const windowSelect = select("runs-window", WINDOWS);
  const since = el("input", { id: "runs-since", type: "datetime-local", step: "1",
    "aria-describedby": "runs-since-error" });
  const until = el("input", { id: "runs-until", type: "datetime-local", step: "1",
    "aria-describedby": "runs-until-error" });
  const sinceError = el("p", { id: "runs-since-error", class: "error field-error", hidden: true });
  const untilError = el("p", { id: "runs-until-error", class: "error field-error", hidden: true });
  const custom = el("div", { class: "custom-range", hidden: true },
    el("div", { class: "field" }, el("label", { for: "runs-since", text: "From (UTC)" }), since, sinceError),
    el("div", { class: "field" }, el("label", { for: "runs-until", text: "To (UTC)" }), until, untilError));
  const live = el("input", { id: "runs-live", type: "checkbox", checked: true });
  const refresh = el("button", { type: "button", class: "secondary", text: "Refresh" });
  const filters = el("form", { class: "filters", "aria-label": "Run filters", action: "#", method: "post" },
    el("div", { class: "field" }, el("label", { for: "runs-status", text: "Status" }), status),
    el("div", { class: "field" }, el("label", { for: "runs-window", text: "Time window" }), windowSelect),
    custom,
    el("div", { class: "field checkbox" }, live,
      el("label", { for: "runs-live", text: "Live (refresh every 2 s)" })),
    refresh);
  const chartSlot = el("div", { class: "chart-slot" });
  const body = el("tbody");
  const table = el("table", { class: "list runs" },
    el("caption", { class: "visually-hidden", text: `Runs of ${schedule.name}, newest first` }),
    el("thead", {}, el("tr", {}, ...["Scheduled for (UTC)", "Status", "Trigger", "Attempts",
      "Last code", "Fire lag", "Run time", "Details"].map((h) => el("th", { scope: "col", text: h })))),
    body);
  const empty = el("p", { class: "empty muted", text: "No runs match." });
  const error = el("p", { class: "error", role: "alert" });
  const older = el("button", { type: "button", class: "secondary", text: "Older runs", hidden: true });
  parent.append(el("section", { class: "card runs-card", "aria-labelledby": "runs-title" },
    el("h2", { id: "runs-title", text: "Runs" }), filters, chartSlot, error,
    el("p", { class: "hint", text: RUN_TIME_HINT }),
    el("div", { class: "table-wrap" }, table), empty, el("div", { class: "pager" }, older)));

  // Rows by run id; a refresh updates cells in place so focus and open details survive.
  const rows = new Map();
  let cursor = null;
  let loading = false;
  let generation = 0;
  let queryRefused = false;

  function query(extra = {}) {
    const q = { schedule_id: schedule.id, limit: PAGE_SIZE, status: status.value || undefined, ...extra };
    if (windowSelect.value === "custom") {
      q.since = utcInputToRfc3339(since.value) || undefined;
      q.until = utcInputToRfc3339(until.value) || undefined;
    } else if (windowSelect.value) {
      q.since = new Date(Date.now() - Number(windowSelect.value) * 1000).toISOString();
    }
    return q;
  }

  function fillCells(entry) {
    const run = entry.run;
    const cells = entry.cells;
    cells.when.textContent = utc(run.scheduled_for, { millis: run.trigger === "manual"
      || run.trigger === "replay" });
    cells.status.replaceChildren(...runStatus(run));
    cells.trigger.textContent = run.trigger;
    cells.attempts.textContent = String(run.attempt_count);
    cells.code.textContent = run.last_status_code ?? "—";
    cells.lag.textContent = duration(fireLagMs(run));
    cells.duration.textContent = duration(runDurationMs(run));
    entry.tr.setAttribute("class", `s-row-${run.status}`);
  }

  async function showAttempts(entry) {
    try {
      const detail = await api.getRun(entry.run.id);
      const lastError = detail.last_error
        && el("p", { class: "error", text: `Last error: ${detail.last_error}` });
      entry.detailCell.replaceChildren(...[attemptsTable(detail), lastError].filter(Boolean));
    } catch (err) {
      entry.detailCell.replaceChildren(el("p", { class: "error", text: `Could not load attempts: ${err.message}` }));
    }
  }

  function makeRow(run) {
    const cells = {};
    for (const [key, label] of [["when", "Scheduled for (UTC)"], ["status", "Status"],
      ["trigger", "Trigger"], ["attempts", "Attempts"], ["code", "Last code"],
      ["lag", "Fire lag"], ["duration", "Run time"]]) {
      cells[key] = el("td", { "data-label": label });
    }
    const detailId = `run-${run.id}`;
    const toggle = el("button", { type: "button", class: "secondary small", "aria-expanded": "false",
      "aria-controls": detailId, text: "Attempts" });
    const tr = el("tr", { "data-run-id": run.id }, ...Object.values(cells),
      el("td", { "data-label": "Details" }, toggle));
    const detailCell = el("td", { colspan: "8" });
    const detailRow = el("tr", { id: detailId, class: "run-detail", hidden: true }, detailCell);
    const entry = { run, tr, cells, toggle, detailRow, detailCell, open: false };
    tr.lastChild.append(replayButton(entry, () => refreshNewest()));
    toggle.setAttribute("aria-label", `Attempts of the run at ${utc(run.scheduled_for)}`);
    toggle.addEventListener("click", async () => {
      entry.open = !entry.open;
      toggle.setAttribute("aria-expanded", String(entry.open));
      toggle.textContent = entry.open ? "Hide attempts" : "Attempts";
      detailRow.hidden = !entry.open;
      if (entry.open) {
        entry.detailCell.replaceChildren(el("p", { class: "muted", text: "Loading attempts…" }));
        await showAttempts(entry);
      }
    });
    fillCells(entry);
    return entry;
  }

  function upsert(runs) {
    for (const run of runs) {
      const known = rows.get(run.id);
      if (known) {
        const changed = JSON.stringify(known.run) !== JSON.stringify(run);
        known.run = run;
        if (changed) {
          fillCells(known);
          if (known.syncReplay) known.syncReplay();
          if (known.open) showAttempts(known);
        }
        continue;
      }
      const entry = makeRow(run);
      rows.set(run.id, entry);
      // Before the first row, in table order, that is older: the table stays newest first
      // however the pages arrive (the map's insertion order is not the table's).
      const before = [...body.querySelectorAll("tr[data-run-id]")]
        .map((tr) => rows.get(tr.dataset.runId))
        .find((e) => e && e !== entry && newer(run, e.run));
      if (before) {
        body.insertBefore(entry.tr, before.tr);
        body.insertBefore(entry.detailRow, before.tr);
      } else {
        body.append(entry.tr, entry.detailRow);
      }
    }
    const all = [...rows.values()].map((e) => e.run);
    chartSlot.replaceChildren(renderChart(all, schedule));
    table.hidden = rows.size === 0;
    empty.hidden = rows.size !== 0;
  }

  function showQueryError(err) {
    // A refused filter stays refused: live refresh waits until the filters change.
    queryRefused = err.status === 422;
    sinceError.hidden = untilError.hidden = true;
    if (err.field === "since" || err.field === "until") {
      const slot = err.field === "since" ? sinceError : untilError;
      slot.textContent = err.message;
      slot.hidden = false;
      (err.field === "since" ? since : until).setAttribute("aria-invalid", "true");
      return;
    }
    error.textContent = `Could not load runs: ${err.message}`;
  }

  async function reset() {
    generation += 1;
    const mine = generation;
    queryRefused = false;
    rows.clear();
    body.replaceChildren();
    error.textContent = "";
    sinceError.hidden = untilError.hidden = true;
    since.removeAttribute("aria-invalid");
    until.removeAttribute("aria-invalid");
    try {
      const page = await api.listRuns(query());
      if (mine !== generation) return;
      upsert(page.items);
      cursor = page.next_cursor;
      older.hidden = !cursor;
    } catch (err) {
      if (mine === generation) showQueryError(err);
      chartSlot.replaceChildren();
      table.hidden = true;
    }
  }

  async function refreshNewest() {
    if (loading) return;
    loading = true;
    const mine = generation;
    try {
      const page = await api.listRuns(query());
      if (mine === generation) {
        upsert(page.items);
        if (rows.size <= page.items.length) {
          cursor = page.next_cursor;
          older.hidden = !cursor;
        }
      }
    } catch (err) {
      if (mine === generation) showQueryError(err);
    } finally {
      loading = false;
    }
  }

  older.addEventListener("click", async () => {
    if (!cursor) return;
    older.disabled = true;
    const mine = generation;
    try {
      const page = await api.listRuns(query({ cursor }));
      if (mine !== generation) return;
      upsert(page.items);
      cursor = page.next_cursor;
      older.hidden = !cursor;
    } catch (err) {
      showQueryError(err);
    } finally {
      older.disabled = false;
    }
  });
  filters.addEventListener("submit", (event) => {
    event.preventDefault();
    reset();
  });
  refresh.addEventListener("click", () => refreshNewest());
  status.addEventListener("change", reset);
  windowSelect.addEventListener("change", () => {
    custom.hidden = windowSelect.value !== "custom";
    reset();
  });
  since.addEventListener("change", reset);
  until.addEventListener("change", reset);

  const timer = setInterval(() => {
    if (live.checked && !queryRefused && document.visibilityState === "visible") refreshNewest();
  }, LIVE_EVERY_MS);
  onCleanup(() => clearInterval(timer));
  reset();
  return { refresh: refreshNewest };
}
