// Who changed what (GET /v1/audit, an admin token): newest first, filtered by action or
// object, one row per change with its field-by-field diff. Every text from the API (names,
// values, addresses) is set as text, never as markup; sealed values arrive as "***".

import { api } from "./api.js";
import { el, focusHeading } from "./dom.js";
import { utc } from "./format.js";

const PAGE_SIZE = 50;
const ACTIONS = ["schedule.create", "schedule.update", "schedule.delete", "schedule.pause",
  "schedule.resume", "schedule.restore", "schedule.trigger", "schedule.backfill",
  "schedule.rotate_secret", "run.replay", "token.create", "token.revoke", "alerts.update",
  "calendar.create", "calendar.update", "calendar.delete"];

function actor(entry) {
  const who = entry.actor || {};
  if (who.operator) return `operator (${who.operator})`;
  return who.token_name ? `token ${who.token_name}` : `token ${who.token_id}`;
}

function shown(value) {
  if (value === null || value === undefined) return "—";
  return typeof value === "string" ? value : JSON.stringify(value);
}

function changeList(changes) {
  const names = Object.keys(changes || {});
  if (names.length === 0) return el("span", { class: "muted", text: "—" });
  return el("ul", { class: "changes" }, ...names.map((name) => el("li", {},
    el("span", { class: "mono", text: name }), ": ",
    el("span", { class: "before", text: shown(changes[name][0]) }), " → ",
    el("span", { class: "after", text: shown(changes[name][1]) }))));
}

function object(entry) {
  if (entry.object_type === "schedule" && entry.object_id && entry.action !== "schedule.delete") {
    return el("a", { href: `#/schedules/${encodeURIComponent(entry.object_id)}`,
      class: "mono", text: entry.object_id });
  }
  return el("span", { class: "mono", text: `${entry.object_type} ${entry.object_id ?? ""}` });
}

function row(entry) {
  return el("tr", { "data-audit-id": entry.id },
    el("td", { "data-label": "At (UTC)", text: utc(entry.at) }),
    el("td", { "data-label": "Action", class: "mono", text: entry.action }),
    el("td", { "data-label": "Object" }, object(entry)),
    el("td", { "data-label": "Actor", text: actor(entry) }),
    el("td", { "data-label": "Changes", class: "wrap" }, changeList(entry.changes)),
    el("td", { "data-label": "Request", class: "mono",
      text: `${entry.request_id ?? "—"} from ${entry.client_address ?? "—"}` }));
}

export async function renderAudit(root) {
  const action = el("select", { id: "audit-action" },
    el("option", { value: "", text: "every action" }),
    ...ACTIONS.map((name) => el("option", { value: name, text: name })));
  const objectId = el("input", { id: "audit-object", class: "mono", autocomplete: "off",
    spellcheck: "false", placeholder: "any object" });
  const filters = el("form", { class: "card filters", method: "get", action: "#" },
    el("div", { class: "field" }, el("label", { for: "audit-action", text: "Action" }), action),
    el("div", { class: "field" }, el("label", { for: "audit-object", text: "Object id" }),
      objectId),
    el("div", { class: "actions" }, el("button", { type: "submit", text: "Show" })));
  const body = el("tbody");
  const table = el("table", { class: "list audit" },
    el("caption", { class: "visually-hidden", text: "Changes, newest first" }),
    el("thead", {}, el("tr", {}, ...["At (UTC)", "Action", "Object", "Actor", "Changes",
      "Request"].map((h) => el("th", { scope: "col", text: h })))),
    body);
  const empty = el("p", { class: "empty muted", text: "No changes recorded." });
  const error = el("p", { class: "error", role: "alert", id: "audit-error" });
  const older = el("button", { type: "button", class: "secondary", text: "Older changes",
    hidden: true });
  let cursor = null;

  async function load(append = false) {
    error.textContent = "";
    try {
      const page = await api.audit({ action: action.value, object_id: objectId.value.trim(),
        limit: PAGE_SIZE, cursor: append ? cursor : undefined });
      if (!append) body.replaceChildren();
      body.append(...page.items.map(row));
      cursor = page.next_cursor;
      older.hidden = !cursor;
    } catch (err) {
      error.textContent = err.status === 403
        ? "The audit log needs an admin token; this one's scope is lower."
        : `Could not load the audit log: ${err.message}`;
    }
    table.hidden = body.children.length === 0;
    empty.hidden = body.children.length !== 0 || Boolean(error.textContent);
  }

  filters.addEventListener("submit", (event) => {
    event.preventDefault();
    load();
  });
  older.addEventListener("click", () => load(true));
  root.append(el("section", {},
    el("div", { class: "view-head" }, el("h1", { text: "Audit" })),
    el("p", { class: "hint", text: "Every change to schedules, runs, tokens and alerts, "
      + "with who made it; secret values read ***." }),
    filters, error, el("div", { class: "table-wrap" }, table), empty, older));
  focusHeading(root);
  await load();
}
