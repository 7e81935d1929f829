// One schedule: its settings, actions, the next fire times (DST changes marked), its stats,
// an "explain an instant" box and its runs.

import { api } from "./api.js";
import { scheduleActions } from "./actions.js";
import { backfillDialog } from "./dialogs.js";
import { el, focusHeading } from "./dom.js";
import { flowSection } from "./flow.js";
import { announce, confirmAction, secretPanel } from "./feedback.js";
import { inZone, localText, offsetAt, offsetOfLocal, utc } from "./format.js";
import { explainSection, statsSection } from "./insight.js";
import { renderRuns } from "./runs.js";

function alertRules(alerts) {
  const rules = [
    alerts.after_failures !== null && `failing after ${alerts.after_failures} failed runs in a row`,
    alerts.late_after_seconds !== null && `late after ${alerts.late_after_seconds} s`,
    alerts.max_duration_ms !== null && `slow above ${alerts.max_duration_ms} ms`,
  ].filter(Boolean);
  return rules.length ? `${rules.join("; ")} (sent to the Alerts page's destination)` : "none";
}

function details(schedule) {
  const row = (term, ...value) => [el("dt", { text: term }), el("dd", {}, ...value)];
  const target = schedule.target;
  const headerCount = Object.keys(target.headers || {}).length;
  const limit = schedule.max_runs === null ? "no limit"
    : `${schedule.runs_planned} of ${schedule.max_runs} planned`;
  const pauseAfter = schedule.pause_after_failures === null ? "never"
    : `after ${schedule.pause_after_failures} failed runs in a row`
      + ` (${schedule.consecutive_failures} now)`;
  return el("dl", { class: "facts" },
    schedule.cron !== null ? row("Cron", el("code", { text: schedule.cron }))
      : schedule.rrule ? row("Rule", el("pre", { text: schedule.rrule }))
        : row("Runs once at", utc(schedule.at)),
    row("Time zone", schedule.timezone),
    schedule.key && row("Key", el("code", { text: schedule.key })),
    schedule.managed_by && row("Managed by", el("span", { class: "managed-by",
      text: schedule.managed_by })),
    row("State", el("span", { class: `badge state-${schedule.status}`, text: schedule.status })),
    schedule.paused_reason && row("Paused because", el("span", { class: "paused-reason",
      text: schedule.paused_reason })),
    schedule.paused_at && row("Paused since", utc(schedule.paused_at)),
    // The next fire is the preview's first (filled in when it loads), so the two agree;
    // next_fire_at is the planner's cursor, which runs a few seconds ahead of it.
    row("Next fire (UTC)", el("span", { id: "next-fire-utc", text: "…" })),
    row("Next fire (schedule's zone)", el("span", { id: "next-fire-local", text: "…" })),
    row("Planned up to (UTC)", el("span", {
      text: schedule.next_fire_at ? `${utc(schedule.next_fire_at)} (not included)` : "everything",
      title: "Occurrences before this instant are already written as pending runs: the "
        + "planner works a few seconds ahead (a minute for infrequent schedules)." })),
    row("Last planned fire", schedule.last_fire_at ? utc(schedule.last_fire_at) : "none yet"),
    row("Target", el("code", { class: "wrap", text: `${target.method} ${target.url}` })),
    row("Headers", headerCount ? Object.keys(target.headers).join(", ") : "none"),
    row("Body", target.body === null ? "cronwire's JSON" : `${target.body.length} characters`),
    row("Retries", `${schedule.retry.max_attempts} attempts, backoff ${schedule.retry.initial_backoff_seconds} s`
      + ` up to ${schedule.retry.max_backoff_seconds} s`),
    row("Misfire policy", `${schedule.misfire_policy} (catch-up ${schedule.catchup_window_seconds} s)`),
    row("Overlap policy", schedule.overlap_policy),
    row("Calendars", (schedule.exclude_calendars || []).length
      ? `${schedule.exclude_calendars.length} excluded; on their dates: ${schedule.calendar_policy}`
      : "none"),
    row("Jitter", schedule.jitter_seconds ? `up to ${schedule.jitter_seconds} s` : "none"),
    row("Max runs", limit),
    row("Pauses itself", pauseAfter),
    row("Alert rules", alertRules(schedule.alerts)),
    row("Active window", `${schedule.starts_at ? utc(schedule.starts_at) : "from creation"} → `
      + `${schedule.ends_at ? utc(schedule.ends_at) : "no end"}`),
    schedule.previous_secret_expires_at
      && row("Previous secret signs until", utc(schedule.previous_secret_expires_at)),
    row("Id", el("code", { text: schedule.id })),
  );
}

/** The settings' "Next fire" rows: the first fire time after now, as the preview lists it. */
function showNextFire(item) {
  const inUtc = document.getElementById("next-fire-utc");
  const local = document.getElementById("next-fire-local");
  if (inUtc) inUtc.textContent = item ? utc(item.utc) : "none";
  if (local) local.textContent = item ? localText(item.local) : "none";
}

/** What a calendar made of a preview item: skipped, or moved from an excluded date. */
function calendarMark(item) {
  if (item.skipped) {
    return el("span", { class: "badge calendar-mark", text: `skipped: ${item.calendar}` });
  }
  if (item.shifted_from) {
    return el("span", { class: "badge calendar-mark",
      text: `moved from ${item.shifted_from} (${item.calendar})` });
  }
  return null;
}

function previewSection(schedule) {
  const list = el("ol", { class: "preview" });
  const count = el("select", { id: "preview-count" },
    ...[10, 25, 100, 500].map((n) => el("option", { value: String(n), text: String(n) })));
  const note = el("p", { class: "hint" });
  async function load() {
    let page;
    try {
      page = await api.preview(schedule.id, count.value);
    } catch (err) {
      list.replaceChildren(el("li", { class: "error", text: `Preview failed: ${err.message}` }));
      return;
    }
    // A fire whose UTC offset differs from the one before it (or from now, for the first)
    // is the first after a DST transition.
    let previous = offsetAt(schedule.timezone, Date.now());
    let transitions = 0;
    list.replaceChildren(...page.items.map((item) => {
      const offset = offsetOfLocal(item.local);
      const changed = offset !== null && offset !== previous;
      const li = el("li", { class: changed ? "dst" : undefined },
        el("span", { class: "utc", text: utc(item.utc) }),
        el("span", { class: "local", text: localText(item.local) }),
        changed && el("span", { class: "badge dst-mark", text: `DST: UTC${previous} → UTC${offset}` }),
        calendarMark(item));
      if (changed) transitions += 1;
      previous = offset ?? previous;
      return li;
    }));
    if (page.items.length === 0) list.replaceChildren(el("li", { class: "muted", text: "No further fire times." }));
    showNextFire(page.items[0]);
    note.textContent = transitions
      ? `${transitions} daylight-saving change${transitions > 1 ? "s" : ""} in this range (marked).`
      : "No daylight-saving change in this range.";
  }
  count.addEventListener("change", load);
  load();
  return el("section", { class: "card", "aria-labelledby": "preview-title" },
    el("div", { class: "view-head" }, el("h2", { id: "preview-title", text: "Next fire times" }),
      el("div", { class: "inline" }, el("label", { for: "preview-count", text: "How many" }), count)),
    el("p", { class: "hint", text: "In UTC and in the schedule's zone." }), note, list);
}

/** A deleted schedule is gone from the API, but its runs are kept: show them. */
async function renderDeletedSchedule(root, id, onCleanup) {
  let kept;
  try {
    kept = await api.listRuns({ schedule_id: id, limit: 1 });
  } catch (err) {
    kept = { items: [] };
  }
  const back = el("p", {}, el("a", { href: "#/schedules", text: "Back to schedules" }));
  if (kept.items.length === 0) {
    root.append(el("section", {}, el("h1", { text: "Schedule not found" }),
      el("p", { text: "No such schedule for this token, and no runs of one." }), back));
    focusHeading(root);
    return;
  }
  const section = el("section", {},
    el("p", { class: "crumbs" }, el("a", { href: "#/schedules", text: "Schedules" })),
    el("h1", { text: "Deleted schedule" }),
    el("p", { text: "This schedule was deleted: it plans nothing more, and its settings are "
      + "gone. Its run history is kept, below." }),
    el("dl", { class: "facts" }, el("dt", { text: "Id" }), el("dd", {}, el("code", { text: id }))));
  root.append(section);
  renderRuns(section, { id, name: "the deleted schedule", timezone: "UTC" }, { onCleanup });
  focusHeading(root);
}

export async function renderSchedulePage(root, { id, secret, onCleanup }) {
  let schedule;
  try {
    schedule = await api.getSchedule(id);
  } catch (err) {
    if (err.status === 404) {
      await renderDeletedSchedule(root, id, onCleanup);
      return;
    }
    root.append(el("section", {}, el("h1", { text: "Schedule not found" }),
      el("p", { text: `Could not load it: ${err.message}` }),
      el("p", {}, el("a", { href: "#/schedules", text: "Back to schedules" }))));
    focusHeading(root);
    return;
  }
  const heading = el("h1", { text: schedule.name });
  const secretSlot = el("div");
  if (secret) secretSlot.append(secretPanel(secret));
  const factsSlot = el("div", {}, details(schedule));
  const actionsSlot = el("div");
  const rotate = el("button", { type: "button", class: "secondary", text: "Rotate secret" });
  rotate.addEventListener("click", async () => {
    const sure = await confirmAction({
      title: "Rotate the signing secret?",
      message: "A new secret signs every delivery from now on; the current one also signs for 24 hours.",
      confirmLabel: "Rotate secret",
    });
    if (!sure) return;
    try {
      const rotated = await api.rotateSecret(schedule.id);
      secretSlot.replaceChildren(secretPanel(rotated.signing_secret, { rotated: true }));
      announce("Signing secret rotated.");
    } catch (err) {
      announce(`Rotate failed: ${err.message}`, "error");
    }
  });
  const backfill = el("button", { type: "button", class: "secondary", text: "Backfill…",
    "aria-label": `Backfill ${schedule.name}` });
  let runs = null;
  backfill.addEventListener("click", () => backfillDialog(schedule, (result) => {
    announce(`Backfill of ${schedule.name}: ${result.created} runs created, `
      + `${result.existing} already had one.`);
    if (runs) runs.refresh();
  }));
  const showActions = () => actionsSlot.replaceChildren(scheduleActions(schedule, (updated) => {
    if (updated === null) {
      window.location.hash = "#/schedules";
      return;
    }
    const hadFocus = actionsSlot.contains(document.activeElement);
    schedule = updated;
    factsSlot.replaceChildren(details(schedule));
    showActions();
    if (hadFocus) actionsSlot.querySelector("button").focus();
    if (runs) runs.refresh();
  }));
  showActions();
  const section = el("section", {},
    el("p", { class: "crumbs" }, el("a", { href: "#/schedules", text: "Schedules" })),
    el("div", { class: "view-head" }, heading,
      el("div", { class: "inline" }, actionsSlot, backfill, rotate)),
    secretSlot,
    el("div", { class: "columns" },
      el("section", { class: "card", "aria-labelledby": "facts-title" },
        el("h2", { id: "facts-title", text: "Settings" }), factsSlot),
      previewSection(schedule)),
    el("div", { class: "columns" }, statsSection(schedule), explainSection(schedule)),
    flowSection(schedule, { onCleanup }));
  root.append(section);
  runs = renderRuns(section, schedule, { onCleanup });
  focusHeading(root);
  if (secret) document.getElementById("signing-secret").focus();
}
