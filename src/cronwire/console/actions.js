// Pause, resume, trigger now and delete: the same buttons on the list and on a schedule.

import { api } from "./api.js";
import { pauseDialog } from "./dialogs.js";
import { el } from "./dom.js";
import { announce, confirmAction } from "./feedback.js";

function failed(what, err) {
  announce(`${what} failed: ${err.message}`, "error");
}

/** Buttons acting on ``schedule``; ``onChange(updated|null)`` runs after each success. */
export function scheduleActions(schedule, onChange, { withEdit = true, compact = false } = {}) {
  const name = schedule.name;
  const size = compact ? " small" : "";
  const button = (label, aria, handler, cls = "") => {
    const node = el("button", { type: "button", class: `${cls}${size}`.trim() || undefined,
      "aria-label": `${aria} ${name}`, text: label });
    node.addEventListener("click", async () => {
      node.disabled = true;
      try {
        await handler();
      } finally {
        node.disabled = false;
      }
    });
    return node;
  };
  // A completed schedule has nothing left to pause or resume (give it more in Edit).
  const toggle = schedule.status === "completed" ? null : schedule.paused
    ? button("Resume", "Resume", async () => {
      try {
        // A fire_all schedule replays every missed occurrence of its catch-up window at
        // once: count them first and ask (it once happened without a word).
        const preview = await api.resume(schedule.id, true);
        if (preview.runs_due > 1) {
          const sure = await confirmAction({
            title: "Resume and deliver the missed runs?",
            message: `Resuming “${name}” delivers ${preview.runs_due.toLocaleString("en")} runs `
              + `at once: misfire policy ${preview.misfire_policy}, catch-up window `
              + `${preview.catchup_window_seconds} s.`,
            confirmLabel: `Resume and deliver ${preview.runs_due.toLocaleString("en")} runs`,
          });
          if (!sure) return;
        }
        const updated = await api.resume(schedule.id);
        announce(updated.runs_due > 0
          ? `Resumed ${name}: ${updated.runs_due.toLocaleString("en")} runs due now.`
          : `Resumed ${name}.`);
        onChange(updated);
      } catch (err) { failed("Resume", err); }
    })
    : button("Pause", "Pause", async () => {
      const answer = await pauseDialog(name);
      if (answer === null) return;
      try {
        const updated = await api.pause(schedule.id, answer.note);
        announce(`Paused ${name}.`);
        onChange(updated);
      } catch (err) { failed("Pause", err); }
    });
  const trigger = button("Trigger now", "Trigger now", async () => {
    try {
      const run = await api.trigger(schedule.id);
      announce(`Triggered ${name}: run ${run.id} is due now.`);
      onChange(schedule);
    } catch (err) { failed("Trigger", err); }
  });
  const remove = button("Delete", "Delete", async () => {
    const sure = await confirmAction({
      title: "Delete this schedule?",
      message: `“${name}” stops firing and its runs not yet started are cancelled. `
        + `Its run history stays readable, on its page (#/schedules/${schedule.id}).`,
      confirmLabel: "Delete schedule",
    });
    if (!sure) return;
    try {
      await api.deleteSchedule(schedule.id);
      announce(`Deleted ${name}.`);
      onChange(null);
    } catch (err) { failed("Delete", err); }
  }, "danger");
  const edit = withEdit && el("a", { class: `button secondary${size}`, href: `#/schedules/${schedule.id}/edit`,
    "aria-label": `Edit ${name}`, text: "Edit" });
  return el("div", { class: compact ? "actions compact" : "actions" }, toggle, trigger, edit, remove);
}
