// The tenant's alerts: where they go (GET/PUT /v1/alerts; the signing secret is shown once,
// after saving) and the events with their delivery status (GET /v1/alerts/events). Every
// text from the API (URLs, schedule names, errors) is set as text, never as markup.

import { api } from "./api.js";
import { el, focusHeading } from "./dom.js";
import { announce, secretPanel } from "./feedback.js";
import { utc } from "./format.js";

const EVENT_TYPES = [
  ["schedule.failing", "failing: a schedule's alert rule after_failures is reached"],
  ["schedule.recovered", "recovered: the next success after failing"],
  ["schedule.late", "late: an occurrence not started late_after_seconds after it was due"],
  ["schedule.slow", "slow: a success that took longer than max_duration_ms"],
  ["schedule.paused", "paused: the schedule paused itself (pause_after_failures)"],
];
const PAGE_SIZE = 50;

function destinationSection() {
  const current = el("p", { id: "alerts-current", class: "muted", text: "Loading…" });
  const url = el("input", { id: "alerts-url", type: "url", class: "mono", required: true,
    autocomplete: "off", spellcheck: "false" });
  const boxes = EVENT_TYPES.map(([type, label]) => {
    const box = el("input", { type: "checkbox", id: `alerts-event-${type.replace(".", "-")}`,
      value: type });
    return [box, el("label", { class: "check" }, box, ` ${label}`)];
  });
  const error = el("p", { class: "error", role: "alert", id: "alerts-error" });
  const secretSlot = el("div");
  const save = el("button", { type: "submit", text: "Save destination" });
  const form = el("form", { class: "card", novalidate: true, method: "post", action: "#" },
    error,
    el("div", { class: "field" }, el("label", { for: "alerts-url", text: "Alert URL" }), url,
      el("p", { class: "hint", text: "Absolute http(s) URL; signed webhooks go here." })),
    el("fieldset", {}, el("legend", { text: "Events" }),
      el("p", { class: "hint", text: "None checked: every event type." }),
      ...boxes.map(([, label]) => label)),
    el("div", { class: "actions" }, save));

  function show(found) {
    if (found === null) {
      current.textContent = "No alert destination yet: events are recorded but not sent.";
      return;
    }
    const events = found.events.length ? found.events.join(", ") : "every event type";
    current.textContent = `Alerts go to ${found.url} (${events}), since ${utc(found.updated_at)}.`;
    url.value = found.url;
    for (const [box] of boxes) box.checked = found.events.includes(box.value);
  }

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    error.textContent = "";
    save.disabled = true;
    try {
      const events = boxes.filter(([box]) => box.checked).map(([box]) => box.value);
      const saved = await api.setAlerts({ url: url.value.trim(), events });
      show(saved);
      secretSlot.replaceChildren(secretPanel(saved.signing_secret));
      announce("Saved the alert destination. Its new signing secret is shown once.");
    } catch (err) {
      error.textContent = err.field ? `${err.field}: ${err.message.replace(`${err.field}: `, "")}`
        : err.message;
      url.focus();
    } finally {
      save.disabled = false;
    }
  });

  api.getAlerts().then(show).catch((err) => {
    if (err.status === 404) show(null);
    else current.textContent = `Could not load the destination: ${err.message}`;
  });
  return el("section", { "aria-labelledby": "alerts-destination-title" },
    el("h2", { id: "alerts-destination-title", text: "Destination" }), current, secretSlot, form);
}

function delivery(event) {
  const code = event.last_status_code === null ? "" : ` (HTTP ${event.last_status_code})`;
  const when = event.delivered_at ? ` at ${utc(event.delivered_at)}` : "";
  return `${event.status}${code}${when}`;
}

function eventRow(event) {
  return el("tr", { "data-event-id": event.id },
    el("td", { "data-label": "At (UTC)", text: utc(event.at) }),
    el("td", { "data-label": "Event", class: "mono", text: event.type }),
    el("td", { "data-label": "Schedule" },
      el("a", { href: `#/schedules/${encodeURIComponent(event.schedule_id)}`,
        text: event.schedule_name })),
    el("td", { "data-label": "Delivery" },
      el("span", { class: `badge alert-${event.status}`, text: delivery(event) })),
    el("td", { "data-label": "Attempts", text: String(event.attempt_count) }),
    el("td", { "data-label": "Last error", class: "wrap", text: event.last_error ?? "—" }));
}

function eventsSection() {
  const body = el("tbody");
  const table = el("table", { class: "list alert-events" },
    el("caption", { class: "visually-hidden", text: "Alert events, newest first" }),
    el("thead", {}, el("tr", {}, ...["At (UTC)", "Event", "Schedule", "Delivery", "Attempts",
      "Last error"].map((h) => el("th", { scope: "col", text: h })))),
    body);
  const empty = el("p", { class: "empty muted", text: "No alert events yet." });
  const error = el("p", { class: "error", role: "alert" });
  const older = el("button", { type: "button", class: "secondary", text: "Older events", hidden: true });
  let cursor = null;

  async function load(append = false) {
    error.textContent = "";
    try {
      const page = await api.alertEvents(append ? cursor : undefined, PAGE_SIZE);
      if (!append) body.replaceChildren();
      body.append(...page.items.map(eventRow));
      cursor = page.next_cursor;
      older.hidden = !cursor;
    } catch (err) {
      error.textContent = `Could not load alert events: ${err.message}`;
    }
    table.hidden = body.children.length === 0;
    empty.hidden = body.children.length !== 0;
  }

  older.addEventListener("click", () => load(true));
  load();
  return el("section", { "aria-labelledby": "alerts-events-title" },
    el("h2", { id: "alerts-events-title", text: "Events" }),
    el("p", { class: "hint", text: "Each schedule's alert rules are set in its Edit form." }),
    error, el("div", { class: "table-wrap" }, table), empty, older);
}

export async function renderAlerts(root) {
  root.append(el("section", {},
    el("div", { class: "view-head" }, el("h1", { text: "Alerts" })),
    destinationSection(), eventsSection()));
  focusHeading(root);
}
