// A schedule's stats over a window, and "explain an instant": what happened (or will) to
// the occurrence at or after a given time, and why (GET .../stats and .../explain).

import { api } from "./api.js";
import { el } from "./dom.js";
import { duration, utc } from "./format.js";

const WINDOWS = ["1h", "24h", "7d", "30d"];

function percentiles(p) {
  if (p.p50 === null) return "none";
  return `p50 ${duration(p.p50)} · p95 ${duration(p.p95)} · p99 ${duration(p.p99)}`;
}

function statsFacts(stats) {
  const row = (term, value) => [el("dt", { text: term }), el("dd", { text: value })];
  const skipped = Object.entries(stats.skipped).map(([why, n]) => `${n} ${why}`).join(", ");
  return el("dl", { class: "facts", id: "stats-facts" },
    row("Runs", String(stats.occurrences)),
    row("Succeeded", String(stats.succeeded)),
    row("Failed", String(stats.failed)),
    row("Skipped", skipped),
    row("Cancelled", String(stats.cancelled)),
    row("Success rate", stats.success_rate === null ? "no run finished"
      : `${(stats.success_rate * 100).toFixed(1)} %`),
    row("Fire lag", percentiles(stats.fire_lag_ms)),
    row("Duration", percentiles(stats.duration_ms)),
    row("Consecutive failures", String(stats.consecutive_failures)),
    row("Last success", stats.last_success_at ? utc(stats.last_success_at) : "never"),
    row("Last failure", stats.last_failure_at ? utc(stats.last_failure_at) : "never"));
}

export function statsSection(schedule) {
  const windowSelect = el("select", { id: "stats-window" },
    ...WINDOWS.map((w) => el("option", { value: w, text: w })));
  windowSelect.value = "24h";
  const body = el("div", { "aria-live": "polite" });
  async function load() {
    try {
      body.replaceChildren(statsFacts(await api.stats(schedule.id, windowSelect.value)));
    } catch (err) {
      body.replaceChildren(el("p", { class: "error", text: `Stats failed: ${err.message}` }));
    }
  }
  windowSelect.addEventListener("change", load);
  load();
  return el("section", { class: "card", "aria-labelledby": "stats-title" },
    el("div", { class: "view-head" }, el("h2", { id: "stats-title", text: "Stats" }),
      el("div", { class: "inline" }, el("label", { for: "stats-window", text: "Stats window" }),
        windowSelect)),
    el("p", { class: "hint", text: "Runs whose occurrence lies in the window." }), body);
}

export function explainSection(schedule) {
  const input = el("input", { id: "explain-at", type: "text", autocomplete: "off",
    spellcheck: "false", value: new Date().toISOString().replace(/\.\d{3}Z$/, "Z"),
    "aria-describedby": "explain-hint" });
  const result = el("div", { id: "explain-result", "aria-live": "polite" });
  const form = el("form", { class: "inline", novalidate: true },
    el("label", { for: "explain-at", text: "Instant" }), input,
    el("button", { type: "submit", text: "Explain" }));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    let found;
    try {
      found = await api.explain(schedule.id, input.value.trim());
    } catch (err) {
      result.replaceChildren(el("p", { class: "error", text: err.message }));
      return;
    }
    const row = (term, value) => [el("dt", { text: term }), el("dd", {}, value)];
    result.replaceChildren(
      el("p", {}, el("span", { class: `badge verdict s-${found.verdict}`, text: found.verdict }),
        " ", el("span", { class: "reason", text: found.reason })),
      el("dl", { class: "facts" },
        row("Occurrence", found.occurrence ? utc(found.occurrence) : "none"),
        row("Previous", found.previous_occurrence ? utc(found.previous_occurrence) : "none"),
        row("Next", found.next_occurrence ? utc(found.next_occurrence) : "none"),
        found.run && row("Run", el("code", { text: found.run.id }))));
  });
  return el("section", { class: "card", "aria-labelledby": "explain-title" },
    el("h2", { id: "explain-title", text: "Explain an instant" }),
    el("p", { class: "hint", id: "explain-hint",
      text: "An RFC 3339 instant (e.g. 2027-03-28T02:30:00+01:00): what happened to the "
        + "first occurrence at or after it, and why." }),
    form, result);
}
