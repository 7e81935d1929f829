// Feedback to the user: the status line, the confirmation dialog, the one-time secret.

import { el } from "./dom.js";

let announcedAt = 0;

/** One line in the page's live region; errors are announced assertively. */
export function announce(text, kind = "ok") {
  announcedAt = Date.now();
  const region = document.getElementById("status");
  region.setAttribute("class", `status ${kind}`);
  region.setAttribute("aria-live", kind === "error" ? "assertive" : "polite");
  region.textContent = text;
}

/** On navigation: keep a line only if it was said just now (it explains the navigation,
 * e.g. "Deleted x." before the list); older lines belong to the previous page. */
export function clearStaleAnnouncement() {
  if (Date.now() - announcedAt > 1500) clearAnnouncement();
}

export function clearAnnouncement() {
  const region = document.getElementById("status");
  region.setAttribute("class", "status");
  region.textContent = "";
}

/** A modal <dialog> asking to confirm; resolves true only on the confirm button. Esc cancels. */
export function confirmAction({ title, message, confirmLabel }) {
  return new Promise((resolve) => {
    const cancel = el("button", { type: "button", class: "secondary", text: "Cancel" });
    const confirm = el("button", { type: "button", class: "danger", text: confirmLabel });
    const heading = el("h2", { id: "confirm-title", text: title });
    const dialog = el("dialog", { class: "confirm", "aria-labelledby": "confirm-title" },
      heading, el("p", { text: message }), el("div", { class: "actions" }, cancel, confirm));
    const done = (answer) => {
      dialog.close();
      dialog.remove();
      resolve(answer);
    };
    cancel.addEventListener("click", () => done(false));
    confirm.addEventListener("click", () => done(true));
    dialog.addEventListener("cancel", (event) => {
      event.preventDefault();
      done(false);
    });
    document.body.append(dialog);
    dialog.showModal();
    cancel.focus();
  });
}

async function copyText(input) {
  try {
    await navigator.clipboard.writeText(input.value);
    return true;
  } catch {
    input.select();
    return document.execCommand("copy");
  }
}

/** The signing secret, shown once (after create or rotate) with a copy button. */
export function secretPanel(secret, { rotated = false } = {}) {
  const input = el("input", {
    id: "signing-secret", type: "text", readonly: true, value: secret, class: "mono",
    spellcheck: "false", autocomplete: "off",
  });
  const result = el("span", { class: "copied", role: "status" });
  const copy = el("button", { type: "button", text: "Copy" });
  copy.addEventListener("click", async () => {
    result.textContent = (await copyText(input)) ? "Copied." : "Select the text and copy it.";
  });
  const panel = el("section", { class: "secret", "aria-labelledby": "secret-title" },
    el("h2", { id: "secret-title", text: rotated ? "New signing secret" : "Signing secret" }),
    el("p", { text: "Shown once: store it now. Receivers verify each delivery's "
      + "webhook-signature with it." + (rotated ? " The previous secret also signs for 24 hours." : "") }),
    el("div", { class: "copy-row" },
      el("label", { for: "signing-secret", class: "visually-hidden", text: "Signing secret" }),
      input, copy, result),
  );
  const dismiss = el("button", { type: "button", class: "secondary", text: "Done, hide it" });
  dismiss.addEventListener("click", () => panel.remove());
  panel.append(dismiss);
  return panel;
}
