// The runs chart: fire lag over time (dots, by outcome) above an outcome strip, as inline
// SVG built element by element (no library, no inline style: colours come from classes).

import { el, svg } from "./dom.js";
import { duration, fireLagMs, parseTime, utc } from "./format.js";

const W = 640;
const H = 170;
const LEFT = 64;
const RIGHT = 12;
const TOP = 10;
const PLOT_BOTTOM = 112;
const STRIP_TOP = 122;
const STRIP_HEIGHT = 12;

function percentile(sorted, p) {
  if (sorted.length === 0) return null;
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))];
}

export function renderChart(runs, schedule) {
  const points = runs
    .map((run) => ({ run, at: parseTime(run.scheduled_for), lag: fireLagMs(run) }))
    .filter((p) => p.at !== null)
    .sort((a, b) => a.at - b.at);
  if (points.length === 0) return el("p", { class: "muted", text: "No runs to chart yet." });

  let t0 = points[0].at;
  let t1 = points[points.length - 1].at;
  if (t1 - t0 < 1000) {
    t0 -= 500;
    t1 += 500;
  }
  const lags = points.filter((p) => p.lag !== null).map((p) => Math.max(0, p.lag));
  const sortedLags = [...lags].sort((a, b) => a - b);
  const yMax = Math.max(10, sortedLags[sortedLags.length - 1] || 0) * 1.1;
  const plotW = W - LEFT - RIGHT;
  const x = (t) => LEFT + ((t - t0) / (t1 - t0)) * plotW;
  const y = (lag) => PLOT_BOTTOM - (Math.max(0, lag) / yMax) * (PLOT_BOTTOM - TOP);

  const titleId = "runs-chart-title";
  const descId = "runs-chart-desc";
  const counts = new Map();
  for (const p of points) counts.set(p.run.status, (counts.get(p.run.status) || 0) + 1);
  const summary = [...counts].map(([s, n]) => `${n} ${s}`).join(", ");
  const p50 = percentile(sortedLags, 0.5);
  const p95 = percentile(sortedLags, 0.95);

  const lagPoints = points.filter((p) => p.lag !== null);
  const line = lagPoints.map((p) => `${x(p.at).toFixed(1)},${y(p.lag).toFixed(1)}`).join(" ");
  const band = Math.max(2, Math.min(12, plotW / points.length - 1));

  const chart = svg("svg", { viewBox: `0 0 ${W} ${H}`, class: "chart", role: "img",
    "aria-labelledby": `${titleId} ${descId}`, preserveAspectRatio: "xMidYMid meet" },
    svg("title", { id: titleId, text: `Runs of ${schedule.name}: fire lag and outcome over time` }),
    svg("desc", { id: descId, text: `${points.length} runs from ${utc(new Date(t0).toISOString())} `
      + `to ${utc(new Date(t1).toISOString())}: ${summary}. Median fire lag ${duration(p50)}.` }),
    // axes and labels
    svg("line", { class: "axis", x1: LEFT, y1: TOP, x2: LEFT, y2: PLOT_BOTTOM }),
    svg("line", { class: "axis", x1: LEFT, y1: PLOT_BOTTOM, x2: W - RIGHT, y2: PLOT_BOTTOM }),
    svg("text", { class: "tick", x: LEFT - 6, y: TOP + 8, "text-anchor": "end", text: duration(yMax) }),
    svg("text", { class: "tick", x: LEFT - 6, y: PLOT_BOTTOM, "text-anchor": "end", text: "0 ms" }),
    svg("text", { class: "tick", x: 4, y: (TOP + PLOT_BOTTOM) / 2, text: "fire lag" }),
    svg("text", { class: "tick", x: 4, y: STRIP_TOP + STRIP_HEIGHT - 2, text: "outcome" }),
    svg("text", { class: "tick", x: LEFT, y: H - 6, text: utc(new Date(t0).toISOString()) }),
    svg("text", { class: "tick", x: W - RIGHT, y: H - 6, "text-anchor": "end",
      text: utc(new Date(t1).toISOString()) }),
    line && svg("polyline", { class: "lag-line", points: line }),
    ...lagPoints.map((p) => svg("circle", { class: `pt s-${p.run.status}`, cx: x(p.at).toFixed(1),
      cy: y(p.lag).toFixed(1), r: 3 },
      svg("title", { text: `${utc(p.run.scheduled_for)}: ${p.run.status}, lag ${duration(p.lag)}` }))),
    ...points.map((p) => svg("rect", { class: `bar s-${p.run.status}`,
      x: (x(p.at) - band / 2).toFixed(1), y: STRIP_TOP, width: band.toFixed(1), height: STRIP_HEIGHT },
      svg("title", { text: `${utc(p.run.scheduled_for)}: ${p.run.status}` }))),
  );
  const legend = el("figcaption", { class: "legend" },
    ...[...counts].map(([status, n]) => el("span", { class: "legend-item" },
      el("span", { class: `swatch s-${status}`, "aria-hidden": "true" }), `${status} ${n}`)),
    el("span", { class: "legend-item muted",
      text: `fire lag p50 ${duration(p50)}, p95 ${duration(p95)}` }));
  return el("figure", { class: "runs-chart" }, chart, legend);
}
