// A schedule's flow control (docs/flow-control.md): on its page, the key and the limits it
// states, and how the key stands now (requests in flight, runs due and waiting, a
// Retry-After hold) from GET /v1/flow-control, the figures the API serves, refreshed every
// 2 s; in the form, its four members.

import { api } from "./api.js";
import { el } from "./dom.js";
import { utc } from "./format.js";

const REFRESH_MS = 2000;

function rateText(rate, burst) {
  if (rate === null) return "no limit";
  // The API's default burst: one second's tokens, at least one (domain/flow_control.py).
  const size = burst ?? Math.max(1, Math.ceil(rate));
  return `${rate} per second, burst ${size}${burst === null ? " (default)" : ""}`;
}

function limitText(limit) {
  return limit === null ? "no limit" : `${limit} in flight`;
}

function stateFacts(state) {
  const row = (term, value) => [el("dt", { text: term }), el("dd", {}, value)];
  const inFlight = state.max_concurrency === null ? String(state.in_flight)
    : `${state.in_flight} of ${state.max_concurrency}`;
  return [
    row("In flight", el("span", { id: "flow-in-flight", text: inFlight })),
    row("Waiting", el("span", { id: "flow-waiting",
      text: `${state.waiting} due, not started` })),
    row("Held until", el("span", { id: "flow-held-until",
      text: state.held_until ? `${utc(state.held_until)} (the receiver's Retry-After)`
        : "not held" })),
    row("Key's limits", `${limitText(state.max_concurrency)}; `
      + `${state.rate_per_second === null ? "no rate limit" : `${state.rate_per_second} per second`}`
      + " (the strictest of the key's schedules)"),
  ];
}

/** The schedule page's "Flow control" card. */
export function flowSection(schedule, { onCleanup }) {
  const flow = schedule.flow_control;
  const card = el("section", { class: "card flow-card", id: "flow-control",
    "aria-labelledby": "flow-title" },
    el("h2", { id: "flow-title", text: "Flow control" }));
  if (flow === null) {
    card.append(el("p", { class: "muted",
      text: "None: its runs start as soon as they are due and an executor is free." }));
    return card;
  }
  const row = (term, value) => [el("dt", { text: term }), el("dd", {}, value)];
  const live = el("dl", { class: "facts", id: "flow-state" });
  const liveNote = el("p", { class: "hint", "aria-live": "polite" });
  async function load() {
    try {
      const page = await api.flowControl(flow.key);
      const state = page.items.find((item) => item.key === flow.key);
      if (state) {
        live.replaceChildren(...stateFacts(state).flat());
        liveNote.textContent = "Refreshed every 2 s.";
      } else {
        live.replaceChildren();
        liveNote.textContent = "The key has no state yet.";
      }
    } catch (err) {
      liveNote.textContent = `Flow control state failed: ${err.message}`;
    }
  }
  load();
  const timer = setInterval(() => {
    if (document.visibilityState === "visible") load();
  }, REFRESH_MS);
  onCleanup(() => clearInterval(timer));
  card.append(
    el("p", { class: "hint lead", text: "Schedules of this tenant with the same key share its "
      + "limits, on every replica. A run held back stays pending." }),
    el("div", { class: "columns" },
      el("dl", { class: "facts", id: "flow-facts" },
        row("Key", el("code", { class: "wrap", text: flow.key })),
        row("Max concurrency", limitText(flow.max_concurrency)),
        row("Rate", rateText(flow.rate_per_second, flow.burst))),
      el("div", {}, live, liveNote)));
  return card;
}

// ---- the form's fields ---------------------------------------------------------------

export const FLOW_FIELDS = [
  { name: "flow_control.key", label: "Flow-control key", mono: true,
    hint: "Schedules with the same key share its limits. Empty with a limit: the target's "
      + "origin. All four empty: no flow control." },
  { name: "flow_control.max_concurrency", label: "Max concurrency", type: "number",
    hint: "Optional, 1 to 10,000 requests of the key in flight." },
  { name: "flow_control.rate_per_second", label: "Rate per second", type: "number", step: "any",
    hint: "Optional, 0.00001 to 10,000 requests of the key started per second (0.5 is one every 2 s)." },
  { name: "flow_control.burst", label: "Burst", type: "number",
    hint: "Optional, with a rate: how many may start at once after a quiet spell." },
];
export const FLOW_INTEGERS = ["flow_control.max_concurrency", "flow_control.burst"];

/** The form's values from a schedule's flow_control (all empty when it has none). */
export function flowValues(flow) {
  const text = (value) => (value === null || value === undefined ? "" : String(value));
  return Object.fromEntries(["key", "max_concurrency", "rate_per_second", "burst"]
    .map((member) => [`flow_control.${member}`, text(flow && flow[member])]));
}

/** flow_control from the form's values (``numberOf(name, text)`` reads a number field):
 * null when all four are empty. */
export function flowFrom(values, numberOf) {
  const key = values["flow_control.key"].trim();
  const flow = { key: key || null };
  for (const member of ["max_concurrency", "rate_per_second", "burst"]) {
    const name = `flow_control.${member}`;
    flow[member] = numberOf(name, values[name]) ?? null;
  }
  return Object.values(flow).every((value) => value === null) ? null : flow;
}

/** Whether flow_control changed. An emptied key field sends null: the target's origin. */
export function flowChanged(next, original) {
  return JSON.stringify(next) !== JSON.stringify(original);
}
