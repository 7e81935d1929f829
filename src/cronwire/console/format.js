// Times and durations as the console shows them. The API speaks RFC 3339 in UTC; a
// schedule's own zone is rendered by the browser's Intl data (IANA names, like the API).

/** Milliseconds since the epoch; tolerates the API's microsecond fractions. */
export function parseTime(iso) {
  if (!iso) return null;
  const trimmed = String(iso).replace(/(\.\d{3})\d+/, "$1");
  const value = Date.parse(trimmed);
  return Number.isNaN(value) ? null : value;
}

const pad = (n, width = 2) => String(n).padStart(width, "0");

/** "2027-03-28 01:00:00 UTC" (with milliseconds when the instant has them). */
export function utc(iso, { millis = false } = {}) {
  const value = parseTime(iso);
  if (value === null) return "—";
  const text = new Date(value).toISOString();
  const seconds = millis && !text.endsWith(".000Z") ? text.slice(11, 23) : text.slice(11, 19);
  return `${text.slice(0, 10)} ${seconds} UTC`;
}

const zoneFormats = new Map();
function zoneFormat(zone) {
  if (!zoneFormats.has(zone)) {
    let format;
    try {
      format = new Intl.DateTimeFormat("en-CA", {
        timeZone: zone, hourCycle: "h23", year: "numeric", month: "2-digit", day: "2-digit",
        hour: "2-digit", minute: "2-digit", second: "2-digit", timeZoneName: "longOffset",
      });
    } catch {
      format = null;
    }
    zoneFormats.set(zone, format);
  }
  return zoneFormats.get(zone);
}

/** The instant on the wall clock of ``zone``: "2027-03-28 03:00:00 +02:00". */
export function inZone(iso, zone) {
  const value = parseTime(iso);
  if (value === null) return "—";
  const format = zoneFormat(zone);
  if (!format) return utc(iso);
  const parts = Object.fromEntries(format.formatToParts(value).map((p) => [p.type, p.value]));
  return `${parts.year}-${parts.month}-${parts.day} ${parts.hour}:${parts.minute}:${parts.second} `
    + offsetText(parts.timeZoneName);
}

function offsetText(name) {
  const offset = (name || "").replace("GMT", "");
  return offset === "" ? "+00:00" : offset;
}

/** The UTC offset of ``zone`` at an instant, as "+02:00". */
export function offsetAt(zone, millis) {
  const format = zoneFormat(zone);
  if (!format) return "+00:00";
  const part = format.formatToParts(millis).find((p) => p.type === "timeZoneName");
  return offsetText(part && part.value);
}

/** The offset written at the end of an RFC 3339 local time ("...+02:00" or "...Z"). */
export function offsetOfLocal(local) {
  const match = /([+-]\d{2}:\d{2}|Z)$/.exec(local || "");
  if (!match) return null;
  return match[1] === "Z" ? "+00:00" : match[1];
}

/** "2027-03-28 03:00:00 +02:00" from the API's "2027-03-28T03:00:00+02:00". */
export function localText(local) {
  const offset = offsetOfLocal(local);
  const wall = String(local).replace(/([+-]\d{2}:\d{2}|Z)$/, "").replace("T", " ");
  return offset ? `${wall} ${offset}` : wall;
}

export function duration(ms) {
  if (ms === null || ms === undefined || Number.isNaN(ms)) return "—";
  if (Math.abs(ms) < 1000) return `${Math.round(ms)} ms`;
  if (Math.abs(ms) < 60_000) return `${(ms / 1000).toFixed(ms < 10_000 ? 2 : 1)} s`;
  return `${(ms / 60_000).toFixed(1)} min`;
}

/** Fire lag: first attempt start minus scheduled_for (the scheduler_fire_lag_seconds metric). */
export function fireLagMs(run) {
  const start = parseTime(run.first_attempt_at);
  const due = parseTime(run.scheduled_for);
  return start === null || due === null ? null : start - due;
}

export function runDurationMs(run) {
  const start = parseTime(run.first_attempt_at);
  const end = parseTime(run.finished_at);
  return start === null || end === null ? null : end - start;
}

/** A datetime-local value ("2027-03-28T01:00" or with seconds) read as UTC, to RFC 3339. */
export function utcInputToRfc3339(value) {
  if (!value) return null;
  return `${value.length === 16 ? `${value}:00` : value}Z`;
}
