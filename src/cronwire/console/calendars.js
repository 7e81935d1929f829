// Calendars (GET/POST/PATCH/DELETE /v1/calendars): the tenant's holiday and business-day
// calendars, each with its dates and where they came from; one form creates one from dates
// or from a country's public holidays, and edits the one picked. Every text from the API
// (names, dates) is set as text, never as markup.

import { api } from "./api.js";
import { el, focusHeading } from "./dom.js";
import { announce, confirmAction } from "./feedback.js";

function source(calendar) {
  const from = calendar.holidays;
  if (!from) return "dates given by hand";
  const where = from.subdivision ? `${from.country}-${from.subdivision}` : from.country;
  return `public holidays of ${where}, ${from.years.join(", ")}`;
}

function field(id, label, input, hint) {
  return el("div", { class: "field", "data-field": id }, el("label", { for: id, text: label }),
    input, hint && el("p", { class: "hint", text: hint }));
}

function lines(text) {
  return text.split(/[\s,]+/).map((d) => d.trim()).filter(Boolean);
}

export async function renderCalendars(root) {
  const heading = el("h1", { text: "Calendars" });
  const body = el("tbody");
  const table = el("table", { class: "calendars" },
    el("thead", {}, el("tr", {}, ...["Name", "Dates", "From", ""].map((t) => el("th", { text: t })))),
    body);
  const name = el("input", { id: "cal-name", autocomplete: "off", spellcheck: "false" });
  const dates = el("textarea", { id: "cal-dates", class: "mono", rows: 4, spellcheck: "false" });
  const country = el("input", { id: "cal-country", class: "mono", autocomplete: "off" });
  const subdivision = el("input", { id: "cal-subdivision", class: "mono", autocomplete: "off" });
  const years = el("input", { id: "cal-years", class: "mono", autocomplete: "off" });
  const error = el("p", { class: "error", role: "alert", id: "cal-error" });
  const title = el("h2", { id: "cal-form-title", text: "New calendar" });
  const save = el("button", { type: "submit", text: "Create calendar" });
  const reset = el("button", { type: "button", class: "secondary", text: "New instead" });
  let editing = null;

  const form = el("form", { class: "card", novalidate: true, method: "post", action: "#" }, title,
    error,
    field("cal-name", "Name", name, "Unique among your calendars, 1 to 100 characters."),
    field("cal-dates", "Dates", dates, "YYYY-MM-DD, one per line; or leave empty and give a "
      + "country below."),
    field("cal-country", "Country (public holidays)", country, "ISO 3166-1 code, e.g. DE."),
    field("cal-subdivision", "Subdivision", subdivision, "Optional, e.g. BY."),
    field("cal-years", "Years", years, "e.g. 2026, 2027 (at most 10)."),
    el("div", { class: "actions" }, save, reset));

  function pick(calendar) {
    editing = calendar;
    title.textContent = calendar ? `Edit ${calendar.name}` : "New calendar";
    save.textContent = calendar ? "Save calendar" : "Create calendar";
    name.value = calendar ? calendar.name : "";
    dates.value = calendar && !calendar.holidays ? calendar.dates.join("\n") : "";
    country.value = calendar?.holidays?.country ?? "";
    subdivision.value = calendar?.holidays?.subdivision ?? "";
    years.value = calendar?.holidays ? calendar.holidays.years.join(", ") : "";
    error.textContent = "";
  }

  async function load() {
    let found;
    try {
      found = await api.listCalendars();
    } catch (err) {
      body.replaceChildren(el("tr", {}, el("td", { class: "error", colspan: "4",
        text: `Could not load the calendars: ${err.message}` })));
      return;
    }
    body.replaceChildren(...found.items.map((calendar) => el("tr", { "data-calendar-id": calendar.id },
      el("td", { "data-label": "Name" }, el("button", { type: "button", class: "link",
        text: calendar.name, on: { click: () => pick(calendar) } })),
      el("td", { "data-label": "Dates", class: "wrap mono",
        text: `${calendar.dates.length}: ${calendar.dates.slice(0, 6).join(", ")}`
          + (calendar.dates.length > 6 ? ", …" : "") }),
      el("td", { "data-label": "From", text: source(calendar) }),
      el("td", {}, el("button", { type: "button", class: "danger", text: "Delete",
        "aria-label": `Delete ${calendar.name}`, on: { click: () => remove(calendar) } })))));
    if (found.items.length === 0) {
      body.replaceChildren(el("tr", {}, el("td", { colspan: "4", class: "muted",
        text: "No calendars yet." })));
    }
  }

  async function remove(calendar) {
    if (!await confirmAction({ title: `Delete ${calendar.name}?`,
      message: "Schedules that exclude it must be changed first.",
      confirmLabel: "Delete calendar" })) return;
    try {
      await api.deleteCalendar(calendar.id);
      announce(`Deleted ${calendar.name}.`);
      if (editing && editing.id === calendar.id) pick(null);
      await load();
    } catch (err) {
      error.textContent = err.message;
      announce(`Not deleted: ${err.message}`, "error");
    }
  }

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    error.textContent = "";
    const wanted = { name: name.value.trim() };
    if (country.value.trim()) {
      wanted.holidays = { country: country.value.trim(),
        subdivision: subdivision.value.trim() || null,
        years: lines(years.value).map(Number) };
    } else {
      wanted.dates = lines(dates.value);
    }
    save.disabled = true;
    try {
      if (editing) {
        const saved = await api.updateCalendar(editing.id, wanted);
        announce(`Saved ${saved.name}; ${saved.replanned_schedules} schedule(s) planned again.`);
      } else {
        const created = await api.createCalendar(wanted);
        announce(`Created ${created.name} (${created.dates.length} dates).`);
      }
      pick(null);
      await load();
    } catch (err) {
      error.textContent = err.message;
    } finally {
      save.disabled = false;
    }
  });
  reset.addEventListener("click", () => pick(null));

  root.append(el("section", {}, el("div", { class: "view-head" }, heading),
    el("p", { class: "hint", text: "Dates a schedule can leave out (its calendar picker), and "
      + "whether an occurrence on them is skipped or moved to a business day." }),
    el("div", { class: "card table-card" }, table), form));
  focusHeading(root);
  await load();
}
