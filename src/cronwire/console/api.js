// The console's only way to the server: the public /v1 API with the tenant's bearer token.
// The token is kept in sessionStorage (this tab only), never in a URL, a cookie or a log.

const TOKEN_KEY = "cronwire.console.token";

export const token = {
  get: () => sessionStorage.getItem(TOKEN_KEY),
  set: (value) => sessionStorage.setItem(TOKEN_KEY, value),
  clear: () => sessionStorage.removeItem(TOKEN_KEY),
};

export class ApiError extends Error {
  constructor(status, body) {
    const detail = (body && body.error) || {};
    super(detail.message || describeStatus(status));
    this.status = status;
    this.field = detail.field || null;
    this.limit = detail.limit || null;
    this.retryAfter = null;
  }
}

function describeStatus(status) {
  if (status === 0) return "cannot reach the cronwire API (network error)";
  if (status === 503) return "the service is unavailable; retry shortly";
  return `the API answered HTTP ${status}`;
}

let unauthorizedHandler = () => {};
/** Called when a signed-in request answers 401 (token revoked): the app signs out. */
export function onUnauthorized(handler) {
  unauthorizedHandler = handler;
}

export async function call(method, path, { body, query, bearer, ifMatch } = {}) {
  const url = new URL(path, window.location.origin);
  for (const [key, value] of Object.entries(query || {})) {
    if (value !== undefined && value !== null && value !== "") url.searchParams.set(key, value);
  }
  const headers = { Accept: "application/json", Authorization: `Bearer ${bearer ?? token.get()}` };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  // The version the change was made against: a schedule changed meanwhile answers 412.
  if (ifMatch !== undefined && ifMatch !== null) headers["If-Match"] = `"${ifMatch}"`;
  let response;
  try {
    response = await fetch(url, {
      method, headers, cache: "no-store", credentials: "omit", referrerPolicy: "no-referrer",
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch {
    throw new ApiError(0, null);
  }
  if (response.status === 204) return null;
  let data = null;
  try {
    data = await response.json();
  } catch {
    data = null;
  }
  if (!response.ok) {
    const error = new ApiError(response.status, data);
    error.retryAfter = response.headers.get("Retry-After");
    error.etag = response.headers.get("ETag");
    if (response.status === 401 && bearer === undefined) unauthorizedHandler(error);
    throw error;
  }
  return data;
}

const id = (value) => encodeURIComponent(value);

export const api = {
  checkToken: (bearer) => call("GET", "/v1/schedules", { query: { limit: 1 }, bearer }),
  listSchedules: (cursor, limit) => call("GET", "/v1/schedules", { query: { cursor, limit } }),
  getSchedule: (scheduleId) => call("GET", `/v1/schedules/${id(scheduleId)}`),
  createSchedule: (body) => call("POST", "/v1/schedules", { body }),
  updateSchedule: (scheduleId, body, version) =>
    call("PATCH", `/v1/schedules/${id(scheduleId)}`, { body, ifMatch: version }),
  deleteSchedule: (scheduleId) => call("DELETE", `/v1/schedules/${id(scheduleId)}`),
  pause: (scheduleId, note) => call("POST", `/v1/schedules/${id(scheduleId)}/pause`,
    { body: note ? { note } : undefined }),
  resume: (scheduleId, dryRun = false) => call("POST", `/v1/schedules/${id(scheduleId)}/resume`,
    { body: dryRun ? { dry_run: true } : undefined }),
  trigger: (scheduleId) => call("POST", `/v1/schedules/${id(scheduleId)}/trigger`),
  rotateSecret: (scheduleId) => call("POST", `/v1/schedules/${id(scheduleId)}/rotate-secret`),
  preview: (scheduleId, count) =>
    call("GET", `/v1/schedules/${id(scheduleId)}/preview`, { query: { count } }),
  backfill: (scheduleId, body) => call("POST", `/v1/schedules/${id(scheduleId)}/backfill`, { body }),
  stats: (scheduleId, window) =>
    call("GET", `/v1/schedules/${id(scheduleId)}/stats`, { query: { window } }),
  explain: (scheduleId, at) =>
    call("GET", `/v1/schedules/${id(scheduleId)}/explain`, { query: { at } }),
  flowControl: (key) => call("GET", "/v1/flow-control", { query: { key } }),
  listRuns: (query) => call("GET", "/v1/runs", { query }),
  getRun: (runId) => call("GET", `/v1/runs/${id(runId)}`),
  replay: (runId) => call("POST", `/v1/runs/${id(runId)}/replay`),
  getAlerts: () => call("GET", "/v1/alerts"),
  setAlerts: (body) => call("PUT", "/v1/alerts", { body }),
  alertEvents: (cursor, limit) => call("GET", "/v1/alerts/events", { query: { cursor, limit } }),
  audit: (query) => call("GET", "/v1/audit", { query }),
  listCalendars: () => call("GET", "/v1/calendars"),
  createCalendar: (body) => call("POST", "/v1/calendars", { body }),
  updateCalendar: (calendarId, body) => call("PATCH", `/v1/calendars/${id(calendarId)}`, { body }),
  deleteCalendar: (calendarId) => call("DELETE", `/v1/calendars/${id(calendarId)}`),
  replayFailed: (body) => call("POST", "/v1/runs/replay", { body: { status: "failed", ...body } }),
};
