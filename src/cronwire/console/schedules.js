// The schedule list: one API page at a time, paged with the API's cursor.

import { api } from "./api.js";
import { scheduleActions } from "./actions.js";
import { el, fill, focusHeading, statusBadge } from "./dom.js";
import { announce } from "./feedback.js";
import { localText, utc } from "./format.js";

const PAGE_SIZE = 20;
// Cursors of the pages seen so far (null: the first page); kept while the tab is open.
const paging = { cursors: [null], index: 0 };

export function resetScheduleList() {
  paging.cursors = [null];
  paging.index = 0;
}

function cell(label, ...content) {
  return el("td", { "data-label": label }, ...content);
}

function lastRunCell(schedule) {
  const td = cell("Last run", el("span", { class: "muted", text: "…" }));
  // The newest run already due: runs planned a few seconds ahead are not "last" yet.
  const now = new Date().toISOString();
  api.listRuns({ schedule_id: schedule.id, until: now, limit: 1 }).then((page) => {
    const run = page.items[0];
    td.replaceChildren(run
      ? el("span", { title: `scheduled for ${utc(run.scheduled_for)}` }, statusBadge(run.status))
      : el("span", { class: "muted", text: "no runs yet" }));
  }).catch(() => td.replaceChildren(el("span", { class: "muted", text: "unavailable" })));
  return td;
}

/** The first fire time after now, as the schedule's page shows it (both from the preview).
 * Not next_fire_at: that is the planner's cursor, a few seconds to a minute ahead of the
 * next fire, so the list showed a later instant than the page. */
function nextFireCell(schedule) {
  const td = cell("Next fire", el("span", { class: "muted", text: "…" }));
  api.preview(schedule.id, 1).then((page) => {
    const next = page.items[0];
    td.replaceChildren(next
      ? el("div", {}, el("span", { class: "when-utc", text: utc(next.utc) }),
        el("span", { class: "when-local", text: localText(next.local) }))
      : el("span", { text: "none" }));
  }).catch(() => td.replaceChildren(el("span", { class: "muted", text: "unavailable" })));
  return td;
}

/** A schedule's key and managing tool (schedules as code) under its name, if it has them. */
function identity(schedule) {
  const parts = [schedule.key && `key ${schedule.key}`,
    schedule.managed_by && `managed by ${schedule.managed_by}`].filter(Boolean);
  return parts.length ? el("div", { class: "muted schedule-identity", text: parts.join(" · ") })
    : null;
}

function row(schedule, reload) {
  const tr = el("tr", { "data-schedule-id": schedule.id });
  const changed = (updated) => {
    if (updated === null) {
      reload();
      return;
    }
    // Replace just this row, keeping keyboard focus on its first action.
    const hadFocus = tr.contains(document.activeElement);
    const fresh = row(updated, reload);
    tr.replaceWith(fresh);
    if (hadFocus) fresh.querySelector(".actions button").focus();
  };
  return fill(tr, {},
    cell("Name", el("a", { href: `#/schedules/${schedule.id}`, text: schedule.name }),
      identity(schedule)),
    cell("Cron", schedule.cron !== null ? el("code", { text: schedule.cron })
      : schedule.rrule ? el("code", { text: schedule.rrule.split("\n").find((l) => l.startsWith("RRULE:")) })
        : el("span", { text: `once at ${utc(schedule.at)}` })),
    cell("Time zone", schedule.timezone),
    cell("State", el("span", { class: `badge state-${schedule.status}`, text: schedule.status })),
    nextFireCell(schedule),
    lastRunCell(schedule),
    cell("Actions", scheduleActions(schedule, changed, { compact: true })),
  );
}

export async function renderScheduleList(root) {
  const body = el("tbody");
  const previous = el("button", { type: "button", class: "secondary", text: "Previous page" });
  const next = el("button", { type: "button", class: "secondary", text: "Next page" });
  const pageLabel = el("span", { class: "muted" });
  const table = el("table", { class: "list schedules" },
    el("caption", { class: "visually-hidden", text: "Schedules of this tenant" }),
    el("thead", {}, el("tr", {}, ...["Name", "Cron", "Time zone", "State", "Next fire (UTC / schedule's zone)",
      "Last run", "Actions"].map((h) => el("th", { scope: "col", text: h })))),
    body);
  const empty = el("p", { class: "empty", hidden: true },
    "No schedules yet. ", el("a", { href: "#/new", text: "Create the first one" }), ".");
  root.append(el("section", {},
    el("div", { class: "view-head" }, el("h1", { text: "Schedules" }),
      el("a", { class: "button", href: "#/new", text: "New schedule" })),
    el("div", { class: "table-wrap" }, table), empty,
    el("nav", { class: "pager", "aria-label": "Schedule pages" }, previous, pageLabel, next)));
  focusHeading(root);

  async function load() {
    let page;
    try {
      page = await api.listSchedules(paging.cursors[paging.index], PAGE_SIZE);
    } catch (err) {
      announce(`Could not load schedules: ${err.message}`, "error");
      return;
    }
    if (page.items.length === 0 && paging.index > 0) {
      // The page emptied (deletes): step back rather than show nothing.
      paging.index -= 1;
      await load();
      return;
    }
    body.replaceChildren(...page.items.map((s) => row(s, load)));
    table.hidden = page.items.length === 0;
    empty.hidden = page.items.length !== 0;
    paging.cursors.length = paging.index + 1;
    if (page.next_cursor) paging.cursors.push(page.next_cursor);
    previous.disabled = paging.index === 0;
    next.disabled = !page.next_cursor;
    pageLabel.textContent = `Page ${paging.index + 1}`;
  }
  previous.addEventListener("click", () => {
    paging.index = Math.max(0, paging.index - 1);
    load();
  });
  next.addEventListener("click", () => {
    if (paging.cursors.length > paging.index + 1) paging.index += 1;
    load();
  });
  await load();
}
