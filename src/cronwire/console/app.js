// The console's entry: hash routes (ids only; the token never enters a URL), sign-in
// state, and one view at a time in <main>.

import { renderAlerts } from "./alerts.js";
import { renderAudit } from "./audit.js";
import { renderCalendars } from "./calendars.js";
import { api, onUnauthorized, token } from "./api.js";
import { el, focusHeading } from "./dom.js";
import { renderFailedRuns } from "./failed.js";
import { announce, clearAnnouncement, clearStaleAnnouncement } from "./feedback.js";
import { renderScheduleForm } from "./schedule-form.js";
import { renderSchedulePage } from "./schedule-page.js";
import { renderScheduleList, resetScheduleList } from "./schedules.js";
import { renderSignIn } from "./signin.js";

const UUID = "([0-9a-fA-F-]{36})";
const ROUTES = [
  [new RegExp("^#?/?(schedules)?$"), () => ({ view: "list" })],
  [new RegExp("^#/new$"), () => ({ view: "new" })],
  [new RegExp("^#/failed$"), () => ({ view: "failed" })],
  [new RegExp("^#/alerts$"), () => ({ view: "alerts" })],
  [new RegExp("^#/audit$"), () => ({ view: "audit" })],
  [new RegExp("^#/calendars$"), () => ({ view: "calendars" })],
  [new RegExp(`^#/schedules/${UUID}$`), (m) => ({ view: "schedule", id: m[1] })],
  [new RegExp(`^#/schedules/${UUID}/edit$`), (m) => ({ view: "edit", id: m[1] })],
];

// Cleanups of the current view (timers); run before the next view renders.
let cleanups = [];
// The secret of a schedule just created, shown once on its page and then forgotten.
let oneTimeSecret = null;

function route() {
  for (const [pattern, make] of ROUTES) {
    const match = pattern.exec(window.location.hash);
    if (match) return make(match);
  }
  return { view: "missing" };
}

function setSignedIn(signedIn) {
  document.getElementById("nav").hidden = !signedIn;
  document.getElementById("sign-out").hidden = !signedIn;
}

async function render() {
  for (const cleanup of cleanups) cleanup();
  cleanups = [];
  const main = document.getElementById("main");
  // A fresh container per view: a slow response of the previous view lands in a detached
  // node instead of the new page.
  const root = el("div", { class: "view" });
  main.replaceChildren(root);
  const signedIn = Boolean(token.get());
  setSignedIn(signedIn);
  if (!signedIn) {
    renderSignIn(root, { onSignedIn: () => {
      clearAnnouncement();
      render();
    } });
    return;
  }
  const onCleanup = (fn) => cleanups.push(fn);
  const target = route();
  if (target.view === "list") {
    await renderScheduleList(root);
  } else if (target.view === "failed") {
    await renderFailedRuns(root);
  } else if (target.view === "alerts") {
    await renderAlerts(root);
  } else if (target.view === "audit") {
    await renderAudit(root);
  } else if (target.view === "calendars") {
    await renderCalendars(root);
  } else if (target.view === "new") {
    renderScheduleForm(root, { onSaved: (created, secret) => {
      oneTimeSecret = { id: created.id, secret };
      window.location.hash = `#/schedules/${created.id}`;
    } });
  } else if (target.view === "schedule") {
    const secret = oneTimeSecret && oneTimeSecret.id === target.id ? oneTimeSecret.secret : null;
    oneTimeSecret = null;
    await renderSchedulePage(root, { id: target.id, secret, onCleanup });
  } else if (target.view === "edit") {
    let schedule;
    try {
      schedule = await api.getSchedule(target.id);
    } catch (err) {
      announce(`Could not load the schedule: ${err.message}`, "error");
      window.location.hash = "#/schedules";
      return;
    }
    renderScheduleForm(root, { schedule, onSaved: (saved) => {
      window.location.hash = `#/schedules/${saved.id}`;
    } });
  } else {
    root.append(el("section", {}, el("h1", { text: "Page not found" }),
      el("p", {}, el("a", { href: "#/schedules", text: "Back to schedules" }))));
    focusHeading(root);
  }
}

function signOut(message) {
  token.clear();
  resetScheduleList();
  oneTimeSecret = null;
  render();
  // After the current task: the failed call's own error handler runs first, and this line
  // is what stays.
  setTimeout(() => announce(message, message.startsWith("Signed out") ? "ok" : "error"), 0);
}

document.getElementById("sign-out").addEventListener("click", () => signOut("Signed out."));
onUnauthorized(() => signOut("Your token is no longer accepted; sign in again."));
window.addEventListener("hashchange", () => {
  clearStaleAnnouncement();
  render();
});
// The skip link must not change the hash (that is the router's).
document.querySelector(".skip").addEventListener("click", (event) => {
  event.preventDefault();
  document.getElementById("main").focus();
});

render();
