// Sign in: paste a token from `cronwire tenant create`; it is checked with one /v1 call.

import { api, token } from "./api.js";
import { el, focusHeading } from "./dom.js";

export function renderSignIn(root, { onSignedIn }) {
  // No name attribute: even if this script failed, the browser would never put the
  // token into a URL or a request body.
  const input = el("input", {
    id: "api-token", type: "password", autocomplete: "off", spellcheck: "false",
    "aria-describedby": "api-token-hint api-token-error", required: true,
  });
  const error = el("p", { id: "api-token-error", class: "error", role: "alert" });
  const button = el("button", { type: "submit", text: "Sign in" });
  const form = el("form", { class: "card signin", method: "post", action: "#", novalidate: true },
    el("label", { for: "api-token", text: "API token" }),
    input,
    el("p", { id: "api-token-hint", class: "hint" },
      "A token printed by ", el("code", { text: "cronwire tenant create NAME" }),
      ". It is kept in this browser tab only and sent only to this server's /v1 API."),
    error,
    button,
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const value = input.value.trim();
    error.textContent = "";
    input.removeAttribute("aria-invalid");
    if (!value) {
      error.textContent = "Paste an API token first.";
      input.setAttribute("aria-invalid", "true");
      input.focus();
      return;
    }
    button.disabled = true;
    try {
      await api.checkToken(value);
      token.set(value);
      onSignedIn();
    } catch (err) {
      error.textContent = err.status === 401
        ? "That token was not accepted: it is unknown or revoked."
        : `Could not sign in: ${err.message}.`;
      input.setAttribute("aria-invalid", "true");
      input.focus();
    } finally {
      button.disabled = false;
    }
  });
  root.append(el("section", { class: "narrow" }, el("h1", { text: "Sign in" }), form));
  focusHeading(root);
  input.focus();
}
