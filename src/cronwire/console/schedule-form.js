// Create and edit a schedule. A 422 from the API names a field; its message is shown
// beside that field (or the nearest enclosing one), and the field gets focus.

import { api } from "./api.js";
import { el, focusHeading } from "./dom.js";
import { announce, confirmAction } from "./feedback.js";
import { FLOW_FIELDS, FLOW_INTEGERS, flowChanged, flowFrom, flowValues } from "./flow.js";

const METHODS = ["POST", "PUT", "PATCH", "GET", "DELETE"];
const MISFIRE = [
  ["fire_all", "fire_all: every missed occurrence within the catch-up window"],
  ["fire_once", "fire_once: one run for the latest missed occurrence"],
  ["skip", "skip: missed occurrences are recorded as skipped"],
];
const OVERLAP = [
  ["allow", "allow: start anyway"],
  ["skip", "skip: record it skipped (reason overlap)"],
  ["buffer_one", "buffer_one: one waits for the running one, more are skipped"],
  ["buffer_all", "buffer_all: up to 100 wait and start in order"],
  ["cancel_other", "cancel_other: cancel the running one, start this one"],
];

const CALENDAR_POLICY = [
  ["skip", "skip: record it skipped (reason calendar)"],
  ["next_business_day", "next_business_day: same local time, the next business day"],
  ["previous_business_day", "previous_business_day: same local time, the business day before"],
];

const ALERT_FIELDS = ["after_failures", "late_after_seconds", "max_duration_ms"];

// Fields by the API's dotted names, in form order.
const FIELDS = [
  { name: "name", label: "Name", required: true },
  { name: "cron", label: "Cron expression", mono: true,
    hint: "5 fields, or 6 with seconds first: */10 * * * * * fires every 10 seconds. "
      + "Day tokens: L, L-2, 15W, LW (day of month), 5L, 2#3 (day of week)." },
  { name: "rrule", label: "RFC 5545 rule", textarea: true, mono: true,
    hint: "Instead of a cron expression: RRULE:FREQ=MONTHLY;BYDAY=MO,TU,WE,TH,FR;BYSETPOS=-1 "
      + "with optional DTSTART, EXDATE and RDATE lines, times local to the time zone." },
  { name: "at", label: "Run once at", mono: true,
    hint: "Instead of a cron expression: fires once at this RFC 3339 instant, e.g. "
      + "2027-01-01T09:00:00Z; the schedule is then completed." },
  { name: "timezone", label: "Time zone", hint: "IANA name, e.g. Europe/Berlin. Default UTC.",
    list: "zones" },
  { name: "target.url", label: "Target URL", required: true, type: "url", mono: true },
  { name: "target.method", label: "Method", options: METHODS.map((m) => [m, m]) },
  { name: "target.headers", label: "Headers", textarea: true, mono: true,
    hint: "One per line as Name: value. Stored values read as ***: leave *** to keep one." },
  { name: "target.body", label: "Body", textarea: true, mono: true,
    hint: "Empty: cronwire sends JSON {schedule_id, run_id, scheduled_for, attempt}." },
  { name: "target.tls.client_certificate", label: "Client certificate (PEM)", textarea: true,
    mono: true, hint: "Optional, for receivers that require mTLS: the certificate, leaf first. "
      + "Write-only: leave empty to keep the current one." },
  { name: "target.tls.client_key", label: "Client key (PEM)", textarea: true, mono: true,
    hint: "The certificate's private key, unencrypted. Sealed at rest, never shown again." },
  { name: "target.tls.remove", label: "Remove the client certificate", checkbox: true,
    editOnly: true },
  { name: "retry.max_attempts", label: "Max attempts", type: "number", hint: "1 to 8." },
  { name: "retry.initial_backoff_seconds", label: "Initial backoff (seconds)", type: "number",
    step: "any", hint: "0.01 to 86,400." },
  { name: "retry.max_backoff_seconds", label: "Max backoff (seconds)", type: "number", step: "any" },
  { name: "misfire_policy", label: "Misfire policy", options: MISFIRE },
  { name: "catchup_window_seconds", label: "Catch-up window (seconds)", type: "number",
    hint: "fire_all replays missed occurrences this far back." },
  { name: "overlap_policy", label: "Overlap policy", options: OVERLAP,
    hint: "What an occurrence does while the previous run is still running or retrying." },
  { name: "jitter_seconds", label: "Jitter (seconds)", type: "number",
    hint: "0 to 3600: each occurrence is delivered up to this late, spreading a herd." },
  { name: "max_runs", label: "Max runs", type: "number",
    hint: "Optional: completed after this many scheduled occurrences." },
  { name: "pause_after_failures", label: "Pause after failures", type: "number",
    hint: "Optional, 1 to 100: pause itself after this many failed runs in a row." },
  { name: "alerts.after_failures", label: "Alert after failures", type: "number",
    hint: "Optional, 1 to 1000: schedule.failing after this many failed runs in a row." },
  { name: "alerts.late_after_seconds", label: "Alert when late (seconds)", type: "number",
    hint: "Optional: schedule.late when a run has not started this long after it was due." },
  { name: "alerts.max_duration_ms", label: "Alert when slower than (ms)", type: "number",
    hint: "Optional: schedule.slow when a success took longer. Alerts go to the Alerts page's destination." },
  ...FLOW_FIELDS,
  { name: "exclude_calendars", label: "Exclude calendars", multiple: true, options: [],
    hint: "The dates of these calendars (see Calendars) are left out. Ctrl/Cmd-click picks "
      + "more than one." },
  { name: "calendar_policy", label: "On an excluded date", options: CALENDAR_POLICY,
    hint: "Business days are neither excluded nor a Saturday or Sunday." },
  { name: "starts_at", label: "Starts at", mono: true,
    hint: "Optional, RFC 3339, e.g. 2027-01-01T00:00:00Z." },
  { name: "ends_at", label: "Ends at", mono: true, hint: "Optional, later than starts at." },
  { name: "paused", label: "Create paused", checkbox: true, createOnly: true },
];

const INTEGER_FIELDS = new Set(["retry.max_attempts", "catchup_window_seconds", "jitter_seconds",
  "max_runs", "pause_after_failures", ...ALERT_FIELDS.map((f) => `alerts.${f}`), ...FLOW_INTEGERS]);
const DEFAULTS = {
  timezone: "UTC", "target.method": "POST", "retry.max_attempts": "3",
  "retry.initial_backoff_seconds": "10", "retry.max_backoff_seconds": "3600",
  misfire_policy: "fire_all", "catchup_window_seconds": "3600", overlap_policy: "allow",
  jitter_seconds: "0", calendar_policy: "skip",
};
// Fieldsets by the names they start with (the blocks in between follow FIELDS' order).
const GROUPS = [
  ["Schedule", "name"], ["Target", "target.url"], ["Retries and misfires", "retry.max_attempts"],
  ["Overlap and limits", "overlap_policy"], ["Alert rules", "alerts.after_failures"],
  ["Flow control", "flow_control.key"], ["Calendars", "exclude_calendars"],
  ["Active window", "starts_at"],
];

function fieldId(name) {
  return `f-${name.replace(/[^a-z0-9]+/gi, "-")}`;
}

function control(field) {
  const id = fieldId(field.name);
  const described = [field.hint && `${id}-hint`, `${id}-error`].filter(Boolean).join(" ");
  const common = { id, "aria-describedby": described, class: field.mono ? "mono" : undefined };
  if (field.options) {
    return el("select", { ...common, multiple: field.multiple }, ...field.options.map(([value, text]) => el("option", { value, text })));
  }
  if (field.textarea) return el("textarea", { ...common, rows: 3, spellcheck: "false" });
  if (field.checkbox) return el("input", { ...common, type: "checkbox" });
  return el("input", {
    ...common, type: field.type || "text", step: field.step, list: field.list,
    required: field.required, spellcheck: "false", autocomplete: "off",
  });
}

function fieldBlock(field, input) {
  const id = fieldId(field.name);
  const label = el("label", { for: id, text: field.label });
  const error = el("p", { id: `${id}-error`, class: "error field-error", hidden: true });
  const hint = field.hint && el("p", { id: `${id}-hint`, class: "hint", text: field.hint });
  const cls = `field${field.checkbox ? " checkbox" : ""}${field.textarea ? " wide" : ""}`;
  return el("div", { class: cls, "data-field": field.name },
    field.checkbox ? [input, label] : [label, input], hint, error);
}

function headersText(headers) {
  return Object.entries(headers || {}).map(([k, v]) => `${k}: ${v}`).join("\n");
}

function valuesOf(schedule) {
  return {
    name: schedule.name, cron: schedule.cron ?? "", rrule: schedule.rrule ?? "",
    at: schedule.at ?? "",
    timezone: schedule.timezone,
    "target.url": schedule.target.url, "target.method": schedule.target.method,
    "target.headers": headersText(schedule.target.headers),
    "target.body": schedule.target.body ?? "",
    "retry.max_attempts": String(schedule.retry.max_attempts),
    "retry.initial_backoff_seconds": String(schedule.retry.initial_backoff_seconds),
    "retry.max_backoff_seconds": String(schedule.retry.max_backoff_seconds),
    misfire_policy: schedule.misfire_policy,
    catchup_window_seconds: String(schedule.catchup_window_seconds),
    starts_at: schedule.starts_at ?? "", ends_at: schedule.ends_at ?? "",
    overlap_policy: schedule.overlap_policy, jitter_seconds: String(schedule.jitter_seconds),
    max_runs: schedule.max_runs === null ? "" : String(schedule.max_runs),
    pause_after_failures: schedule.pause_after_failures === null ? ""
      : String(schedule.pause_after_failures),
    ...Object.fromEntries(ALERT_FIELDS.map((f) => [`alerts.${f}`,
      schedule.alerts[f] === null ? "" : String(schedule.alerts[f])])),
    ...flowValues(schedule.flow_control),
    calendar_policy: schedule.calendar_policy ?? "skip",
  };
}

class FieldError extends Error {
  constructor(field, message) {
    super(message);
    this.field = field;
  }
}

function parseHeaders(text) {
  const headers = {};
  text.split("\n").forEach((line, index) => {
    if (!line.trim()) return;
    const colon = line.indexOf(":");
    if (colon <= 0) throw new FieldError("target.headers", `line ${index + 1}: write it as Name: value`);
    headers[line.slice(0, colon).trim()] = line.slice(colon + 1).trim();
  });
  return headers;
}

/** target.tls from the form: both PEMs (a new certificate), null (removed), or undefined. */
function tlsFrom(values) {
  if (values["target.tls.remove"]) return null;
  const certificate = (values["target.tls.client_certificate"] || "").trim();
  const key = (values["target.tls.client_key"] || "").trim();
  if (!certificate && !key) return undefined;
  if (!certificate) throw new FieldError("target.tls.client_certificate", "give the certificate with its key");
  if (!key) throw new FieldError("target.tls.client_key", "give the key with its certificate");
  return { client_certificate: `${certificate}\n`, client_key: `${key}\n` };
}

function numberOf(name, text) {
  if (text.trim() === "") return undefined;
  const value = Number(text);
  if (!Number.isFinite(value)) throw new FieldError(name, "must be a number");
  if (INTEGER_FIELDS.has(name) && !Number.isInteger(value)) {
    throw new FieldError(name, "must be a whole number");
  }
  return value;
}

/** The create body from the form's values (the API applies defaults to what is left out). */
function bodyFrom(values) {
  const retry = {};
  for (const key of ["max_attempts", "initial_backoff_seconds", "max_backoff_seconds"]) {
    const value = numberOf(`retry.${key}`, values[`retry.${key}`]);
    if (value !== undefined) retry[key] = value;
  }
  const body = {
    name: values.name, cron: values.cron.trim() || null, rrule: values.rrule.trim() || null,
    at: values.at.trim() || null,
    timezone: values.timezone.trim() || "UTC",
    target: {
      url: values["target.url"].trim(), method: values["target.method"],
      headers: parseHeaders(values["target.headers"]),
      body: values["target.body"] === "" ? null : values["target.body"],
    },
    retry, misfire_policy: values.misfire_policy,
    starts_at: values.starts_at.trim() || null, ends_at: values.ends_at.trim() || null,
  };
  const tls = tlsFrom(values);
  if (tls !== undefined) body.target.tls = tls;
  const catchup = numberOf("catchup_window_seconds", values.catchup_window_seconds);
  if (catchup !== undefined) body.catchup_window_seconds = catchup;
  body.overlap_policy = values.overlap_policy;
  body.jitter_seconds = numberOf("jitter_seconds", values.jitter_seconds) ?? 0;
  body.max_runs = numberOf("max_runs", values.max_runs) ?? null;
  body.pause_after_failures = numberOf("pause_after_failures", values.pause_after_failures) ?? null;
  body.alerts = Object.fromEntries(ALERT_FIELDS.map((f) =>
    [f, numberOf(`alerts.${f}`, values[`alerts.${f}`]) ?? null]));
  body.flow_control = flowFrom(values, numberOf);
  body.exclude_calendars = values.exclude_calendars;
  body.calendar_policy = values.calendar_policy;
  return body;
}

/** The PATCH body: only what changed (target and retry are replaced whole, as the API says). */
function changesFrom(next, original) {
  const changes = {};
  for (const key of ["name", "cron", "rrule", "timezone", "misfire_policy", "catchup_window_seconds",
    "overlap_policy", "jitter_seconds", "max_runs", "pause_after_failures", "calendar_policy"]) {
    if (next[key] !== undefined && next[key] !== original[key]) changes[key] = next[key];
  }
  const target = { ...next.target, headers: { ...next.target.headers } };
  // Headers merge name by name, and values read back as "***" (the API keeps the stored
  // value for "***"): a line deleted in the form is sent as null so it is removed.
  const kept = new Set(Object.keys(target.headers).map((name) => name.toLowerCase()));
  for (const name of Object.keys(original.target.headers || {})) {
    if (!kept.has(name.toLowerCase())) target.headers[name] = null;
  }
  // A read's tls is the certificate's subject and expiry: it is never sent back as it is.
  const { tls: _shown, ...before } = original.target;
  if (JSON.stringify(target) !== JSON.stringify(before)) changes.target = target;
  if (flowChanged(next.flow_control, original.flow_control)) changes.flow_control = next.flow_control;
  if (JSON.stringify([...next.exclude_calendars].sort())
      !== JSON.stringify([...(original.exclude_calendars || [])].sort())) {
    changes.exclude_calendars = next.exclude_calendars;
  }
  // Every rule is sent: the API merges rule by rule, and a null rule removes it.
  if (ALERT_FIELDS.some((f) => next.alerts[f] !== original.alerts[f])) changes.alerts = next.alerts;
  const retry = { ...original.retry, ...next.retry };
  if (JSON.stringify(retry) !== JSON.stringify(original.retry)) changes.retry = retry;
  for (const key of ["starts_at", "ends_at", "at"]) {
    const before = original[key] ? Date.parse(original[key]) : null;
    const after = next[key] ? Date.parse(next[key]) : null;
    if (before !== after || (next[key] && Number.isNaN(after))) changes[key] = next[key];
  }
  return changes;
}

/** The calendar picker's options (the tenant's calendars by name), ``chosen`` selected. */
async function loadCalendars(select, chosen) {
  let found;
  try {
    found = await api.listCalendars();
  } catch {
    found = { items: [] };
  }
  const names = new Map(found.items.map((c) => [c.id, c.name]));
  // A chosen id the list does not hold is kept selected, shown by its id.
  const ids = [...names.keys(), ...chosen.filter((c) => !names.has(c))];
  select.replaceChildren(...ids.map((calendarId) => el("option", { value: calendarId,
    text: names.get(calendarId) ?? calendarId })));
  for (const option of select.options) option.selected = chosen.includes(option.value);
  select.size = Math.min(Math.max(ids.length, 2), 6);
}

function zoneList() {
  const zones = typeof Intl.supportedValuesOf === "function" ? Intl.supportedValuesOf("timeZone") : [];
  return el("datalist", { id: "zones" }, ...["UTC", ...zones].map((z) => el("option", { value: z })));
}

/** ``schedule``: edit that schedule; absent: create. ``onSaved(schedule, secret)``. */
export function renderScheduleForm(root, { schedule = null, onSaved }) {
  const editing = schedule !== null;
  const inputs = new Map();
  const blocks = [];
  for (const field of FIELDS) {
    if ((editing && field.createOnly) || (!editing && field.editOnly)) continue;
    const input = control(field);
    inputs.set(field.name, input);
    blocks.push(fieldBlock(field, input));
  }
  const shown = editing ? schedule.target.tls : null;
  if (shown) {  // what the write-only certificate is, beside its field
    const hint = blocks.find((b) => b.dataset.field === "target.tls.client_certificate")
      .querySelector(".hint");
    hint.textContent = `Current: ${shown.client_certificate_subject}, expires `
      + `${shown.client_certificate_not_after}. ${hint.textContent}`;
  }
  const initial = editing ? valuesOf(schedule) : DEFAULTS;
  for (const [name, input] of inputs) {
    if (input.type === "checkbox") input.checked = false;
    else if (!input.multiple) input.value = initial[name] ?? "";
  }
  loadCalendars(inputs.get("exclude_calendars"), editing ? schedule.exclude_calendars : []);
  const formError = el("p", { class: "error", role: "alert", id: "form-error" });
  const submit = el("button", { type: "submit", text: editing ? "Save changes" : "Create schedule" });
  const cancel = el("a", { class: "button secondary", text: "Cancel",
    href: editing ? `#/schedules/${schedule.id}` : "#/schedules" });
  const starts = GROUPS.map(([, first]) => blocks.findIndex((b) => b.dataset.field === first));
  const fieldsets = GROUPS.map(([legend], i) => el("fieldset", {}, el("legend", { text: legend }),
    ...blocks.slice(starts[i], starts[i + 1] ?? blocks.length)));
  // A schedule a tool manages (schedules as code) is overwritten by its next apply: say
  // so before the edit, and ask once more before saving it.
  const managedBy = editing ? schedule.managed_by : null;
  const managedNote = managedBy ? el("p", { class: "managed-warning", role: "note",
    text: `Managed by ${managedBy}: the next apply from there puts its own definition `
      + "back. Change it in its source instead, or expect this edit to be undone." }) : null;
  const form = el("form", { class: "card schedule-form", novalidate: true, method: "post", action: "#" },
    managedNote, formError, ...fieldsets, zoneList(),
    el("div", { class: "actions" }, submit, cancel));

  function clearErrors() {
    formError.textContent = "";
    for (const node of form.querySelectorAll(".field-error")) {
      node.hidden = true;
      node.textContent = "";
    }
    for (const input of inputs.values()) input.removeAttribute("aria-invalid");
  }

  function showError(field, message) {
    // The field named, or the nearest enclosing one ("target.headers.x-a" → target.headers).
    let name = field;
    while (name && !inputs.has(name)) name = name.includes(".") ? name.slice(0, name.lastIndexOf(".")) : "";
    const text = message.startsWith(`${field}: `) ? message.slice(field.length + 2) : message;
    if (!name) {
      formError.textContent = message;
      formError.scrollIntoView({ block: "nearest" });
      return;
    }
    const input = inputs.get(name);
    const slot = form.querySelector(`#${fieldId(name)}-error`);
    slot.textContent = name === field ? text : message;
    slot.hidden = false;
    input.setAttribute("aria-invalid", "true");
    input.focus();
  }

  // Someone saved this schedule after this form was opened: nothing of ours was written.
  function showConflict(err) {
    const now = (err.etag || "").replaceAll('"', "");
    formError.replaceChildren(
      `Someone else changed this schedule while you were editing it${now ? ` (it is now `
        + `version ${now}; you opened version ${schedule.version})` : ""}. Your changes were `
        + "not saved. ",
      el("a", { href: `#/schedules/${encodeURIComponent(schedule.id)}`, id: "edit-conflict-open",
        text: "See the current schedule" }),
      ", then edit it again.");
    formError.scrollIntoView({ block: "nearest" });
    announce("Not saved: the schedule was changed by someone else meanwhile.", "error");
  }

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    clearErrors();
    const values = Object.fromEntries([...inputs].map(([name, input]) =>
      [name, input.type === "checkbox" ? input.checked
        : input.multiple ? [...input.selectedOptions].map((o) => o.value) : input.value]));
    let body;
    try {
      body = bodyFrom(values);
    } catch (err) {
      if (err instanceof FieldError) {
        showError(err.field, err.message);
        return;
      }
      throw err;
    }
    submit.disabled = true;
    try {
      if (editing) {
        const changes = changesFrom(body, schedule);
        if (Object.keys(changes).length === 0) {
          announce("Nothing changed.");
          onSaved(schedule, null);
          return;
        }
        if (managedBy && !await confirmAction({
          title: "Edit a managed schedule?",
          message: `${managedBy} manages this schedule; its next apply undoes this edit.`,
          confirmLabel: "Save anyway",
        })) return;
        const saved = await api.updateSchedule(schedule.id, changes, schedule.version);
        announce(`Saved ${saved.name}.`);
        onSaved(saved, null);
      } else {
        if (values.paused) body.paused = true;
        const created = await api.createSchedule(body);
        announce(`Created ${created.name}.`);
        onSaved(created, created.signing_secret);
      }
    } catch (err) {
      if (err.status === 412) showConflict(err);
      else if (err.field) showError(err.field, err.message);
      else {
        formError.textContent = err.message;
        formError.scrollIntoView({ block: "nearest" });
      }
    } finally {
      submit.disabled = false;
    }
  });

  root.append(el("section", {},
    el("div", { class: "view-head" }, el("h1", { text: editing ? `Edit ${schedule.name}` : "New schedule" })),
    form));
  focusHeading(root);
}
