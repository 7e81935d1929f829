// The two dialogs of the scheduling semantics: pause with a note, and backfill with its
// dry-run preview. Both are modal <dialog>s like the confirmation (Esc cancels); an API
// refusal is shown inside the dialog, beside the field it names.

import { api } from "./api.js";
import { el } from "./dom.js";
import { utc, utcInputToRfc3339 } from "./format.js";

const OVERLAP = ["allow", "skip", "buffer_one", "buffer_all", "cancel_other"];

function modal(titleId, ...children) {
  const dialog = el("dialog", { class: "confirm", "aria-labelledby": titleId }, ...children);
  document.body.append(dialog);
  return dialog;
}

function fieldOf(id, label, input, hint) {
  return el("div", { class: "field" }, el("label", { for: id, text: label }), input,
    hint && el("p", { class: "hint", id: `${id}-hint`, text: hint }),
    el("p", { class: "error field-error", id: `${id}-error`, hidden: true }));
}

/** Ask for an optional pause note; resolves {note} (null note: none) or null if cancelled. */
export function pauseDialog(name) {
  return new Promise((resolve) => {
    const note = el("input", { id: "pause-note", type: "text", maxlength: 1000,
      autocomplete: "off", "aria-describedby": "pause-note-hint" });
    const cancel = el("button", { type: "button", class: "secondary", text: "Cancel" });
    const confirm = el("button", { type: "submit", text: "Pause schedule" });
    const form = el("form", { method: "dialog" },
      el("h2", { id: "pause-title", text: `Pause ${name}?` }),
      el("p", { text: "No new runs are planned until it is resumed; runs already started finish." }),
      fieldOf("pause-note", "Note (optional)", note,
        "Why, for whoever looks next: kept as the schedule's paused reason."),
      el("div", { class: "actions" }, cancel, confirm));
    const dialog = modal("pause-title", form);
    const done = (answer) => {
      dialog.close();
      dialog.remove();
      resolve(answer);
    };
    cancel.addEventListener("click", () => done(null));
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      done({ note: note.value.trim() || null });
    });
    dialog.addEventListener("cancel", (event) => {
      event.preventDefault();
      done(null);
    });
    dialog.showModal();
    note.focus();
  });
}

/** Backfill ``schedule``: a window, a policy, a dry run first; ``onDone(result)`` after a
 * real backfill. */
export function backfillDialog(schedule, onDone) {
  const start = el("input", { id: "backfill-start", type: "datetime-local", step: "1",
    "aria-describedby": "backfill-start-error" });
  const end = el("input", { id: "backfill-end", type: "datetime-local", step: "1",
    "aria-describedby": "backfill-end-error" });
  const policy = el("select", { id: "backfill-policy" },
    ...OVERLAP.map((p) => el("option", { value: p, text: p === schedule.overlap_policy
      ? `${p} (the schedule's)` : p })));
  policy.value = schedule.overlap_policy || "allow";
  const formError = el("p", { class: "error", role: "alert", id: "backfill-error" });
  const result = el("div", { class: "backfill-result", role: "status" });
  const preview = el("button", { type: "button", class: "secondary", text: "Preview (dry run)" });
  const create = el("button", { type: "submit", text: "Create runs" });
  const close = el("button", { type: "button", class: "secondary", text: "Close" });
  const form = el("form", { method: "dialog", novalidate: true },
    el("h2", { id: "backfill-title", text: `Backfill ${schedule.name}` }),
    el("p", { text: "Every occurrence in [start, end) without a run gets one, due now. "
      + "Occurrences that already have a run keep it. At most 10,000 per request." }),
    fieldOf("backfill-start", "Start (UTC, inclusive)", start),
    fieldOf("backfill-end", "End (UTC, exclusive)", end),
    fieldOf("backfill-policy", "Overlap policy", policy),
    formError, result,
    el("div", { class: "actions" }, close, preview, create));
  const dialog = modal("backfill-title", form);
  dialog.classList.add("wide");

  function clearErrors() {
    formError.textContent = "";
    for (const node of form.querySelectorAll(".field-error")) {
      node.hidden = true;
      node.textContent = "";
    }
    start.removeAttribute("aria-invalid");
    end.removeAttribute("aria-invalid");
  }

  function showError(err) {
    const slot = err.field && form.querySelector(`#backfill-${err.field}-error`);
    if (slot) {
      slot.textContent = err.message;
      slot.hidden = false;
      const input = { start, end }[err.field];
      if (input) {
        input.setAttribute("aria-invalid", "true");
        input.focus();
      }
    } else {
      formError.textContent = err.message;
    }
  }

  async function send(dryRun) {
    clearErrors();
    const body = { start: utcInputToRfc3339(start.value), end: utcInputToRfc3339(end.value),
      overlap_policy: policy.value, dry_run: dryRun };
    if (!body.start || !body.end) {
      showError({ field: body.start ? "end" : "start", message: "Give both start and end." });
      return;
    }
    preview.disabled = create.disabled = true;
    try {
      const answer = await api.backfill(schedule.id, body);
      const count = dryRun ? answer.occurrences - answer.existing : answer.created;
      result.replaceChildren(...[
        el("p", { class: "backfill-summary", text: `${answer.occurrences} occurrences: `
          + `${dryRun ? "would create" : "created"} ${count} runs; ${answer.existing} already had one.` }),
        answer.first.length > 0 && el("ol", { class: "preview backfill-first" },
          ...answer.first.map((at) => el("li", { text: utc(at) }))),
        answer.first.length < answer.occurrences
          && el("p", { class: "hint", text: `The first ${answer.first.length} shown.` }),
      ].filter(Boolean));
      if (!dryRun) onDone(answer);
    } catch (err) {
      showError(err);
    } finally {
      preview.disabled = create.disabled = false;
    }
  }

  const done = () => {
    dialog.close();
    dialog.remove();
  };
  preview.addEventListener("click", () => send(true));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    send(false);
  });
  close.addEventListener("click", done);
  dialog.addEventListener("cancel", (event) => {
    event.preventDefault();
    done();
  });
  dialog.showModal();
  start.focus();
}
