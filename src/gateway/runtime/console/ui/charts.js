// Time-series charts for the mcp-edge console, drawn as inline SVG by this script (no library,
// nothing fetched from elsewhere). A chart shows one or more series over the history's points;
// pointing at it (mouse) or focusing it and pressing the arrow keys shows the values at that
// second. Every value is put into the page as text, never as markup.
"use strict";

const SVG = "http://www.w3.org/2000/svg";
const W = 560, H = 150, PAD_L = 46, PAD_R = 10, PAD_T = 22, PAD_B = 20;

function svgEl(tag, attrs, text) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
  if (text != null) e.textContent = String(text);
  return e;
}

// A number for an axis or a tooltip: never `-0`, at most two decimals.
function chartNum(v) {
  if (v == null || Number.isNaN(v)) return "–";
  if (Math.abs(v) < 0.005) return "0";
  if (Math.abs(v) >= 100 || Number.isInteger(v)) return Math.round(v).toLocaleString("en");
  return v.toFixed(2);
}

function niceMax(m) {
  if (!(m > 0)) return 1;
  const p = Math.pow(10, Math.floor(Math.log10(m)));
  for (const f of [1, 2, 2.5, 5, 10]) if (m <= f * p) return f * p;
  return 10 * p;
}

function clock(t) {
  return new Date(t).toISOString().slice(11, 19);
}

// chart({key, title, unit, series: [{name, cls, values: [number|null...]}], times: [ms...]})
// → a <figure> holding the SVG; `data-total` sums the first series (for tests and readers).
function chart(spec) {
  const { key, title, unit, series, times } = spec;
  const fig = document.createElement("figure");
  fig.className = "chart";
  const cap = document.createElement("figcaption");
  cap.textContent = title;
  fig.append(cap);
  const all = series.flatMap((s) => s.values.filter((v) => v != null));
  const max = niceMax(Math.max(0, ...all));
  const n = times.length;
  const x = (i) => PAD_L + (n <= 1 ? 0 : (i * (W - PAD_L - PAD_R)) / (n - 1));
  const y = (v) => PAD_T + (H - PAD_T - PAD_B) * (1 - v / max);
  const total = series.length ? series[0].values.reduce((a, v) => a + (v || 0), 0) : 0;
  const svg = svgEl("svg", {
    viewBox: `0 0 ${W} ${H}`, class: "chart-svg", role: "img", tabindex: 0,
    "data-chart": key, "data-points": n, "data-total": Math.round(total * 1000) / 1000,
    "aria-label": `${title}: ${n} points, highest ${chartNum(Math.max(0, ...all))} ${unit}. Arrow keys read the values.`,
  });
  for (const f of [0, 0.5, 1]) {
    svg.append(svgEl("line", { x1: PAD_L, x2: W - PAD_R, y1: y(max * f), y2: y(max * f), class: "grid" }));
    svg.append(svgEl("text", { x: PAD_L - 4, y: y(max * f) + 4, class: "axis", "text-anchor": "end" }, chartNum(max * f)));
  }
  if (n > 0) {
    svg.append(svgEl("text", { x: PAD_L, y: H - 4, class: "axis" }, clock(times[0])));
    svg.append(svgEl("text", { x: W - PAD_R, y: H - 4, class: "axis", "text-anchor": "end" }, clock(times[n - 1])));
  } else {
    svg.append(svgEl("text", { x: W / 2, y: H / 2, class: "axis", "text-anchor": "middle" }, "no data yet"));
  }
  series.forEach((s, si) => {
    let d = "";
    let pen = false;
    s.values.forEach((v, i) => {
      if (v == null) { pen = false; return; }
      d += `${pen ? "L" : "M"}${x(i).toFixed(1)},${y(v).toFixed(1)}`;
      pen = true;
    });
    if (d) svg.append(svgEl("path", { d, class: `line ${s.cls || `s${si}`}`, "data-series": s.name }));
    // A value with no neighbour draws no segment: mark it with a dot.
    s.values.forEach((v, i) => {
      const alone = v != null && (i === 0 || s.values[i - 1] == null) && (i === n - 1 || s.values[i + 1] == null);
      if (alone) svg.append(svgEl("circle", { cx: x(i).toFixed(1), cy: y(v).toFixed(1), r: 3, class: `dot ${s.cls || `s${si}`}` }));
    });
    svg.append(svgEl("text", { x: PAD_L + 4 + si * 120, y: 12, class: `legend ${s.cls || `s${si}`}` }, s.name));
  });
  const cursor = svgEl("line", { x1: 0, x2: 0, y1: PAD_T, y2: H - PAD_B, class: "cursor", visibility: "hidden" });
  const tip = svgEl("text", { x: W - PAD_R, y: 12, class: "tip", "text-anchor": "end" }, "");
  svg.append(cursor, tip);
  let at = -1;
  const show = (i) => {
    if (n === 0) return;
    at = Math.max(0, Math.min(n - 1, i));
    cursor.setAttribute("x1", x(at));
    cursor.setAttribute("x2", x(at));
    cursor.setAttribute("visibility", "visible");
    const parts = series.map((s) => `${s.name} ${chartNum(s.values[at])}`);
    tip.textContent = `${clock(times[at])} · ${parts.join(" · ")} ${unit}`;
  };
  svg.addEventListener("mousemove", (ev) => {
    const r = svg.getBoundingClientRect();
    const px = ((ev.clientX - r.left) / r.width) * W;
    show(Math.round(((px - PAD_L) / (W - PAD_L - PAD_R)) * (n - 1)));
  });
  svg.addEventListener("mouseleave", () => { cursor.setAttribute("visibility", "hidden"); tip.textContent = ""; });
  svg.addEventListener("keydown", (ev) => {
    if (ev.key === "ArrowLeft") { show(at < 0 ? n - 1 : at - 1); ev.preventDefault(); }
    if (ev.key === "ArrowRight") { show(at < 0 ? n - 1 : at + 1); ev.preventDefault(); }
  });
  fig.append(svg);
  return fig;
}

// The charts of a history's points: the overview's, one pool's, one tool's.
const Charts = {
  chart,
  chartNum,
  overview(points) {
    const times = points.map((p) => p.t);
    const perSec = (p, v) => (p.span_ms > 0 ? (v * 1000) / p.span_ms : null);
    return [
      chart({ key: "requests", title: "Requests per second", unit: "req/s", times,
        series: [{ name: "requests", cls: "s0", values: points.map((p) => perSec(p, p.requests)) }] }),
      chart({ key: "errors", title: "Errors per second, by side", unit: "err/s", times,
        series: ["client", "upstream", "gateway"].map((k, i) => ({ name: k, cls: `e${i}`, values: points.map((p) => perSec(p, p.errors[k])) })) }),
      chart({ key: "latency", title: "Latency (ms)", unit: "ms", times,
        series: [{ name: "p50", cls: "s0", values: points.map((p) => p.p50_ms) }, { name: "p99", cls: "s1", values: points.map((p) => p.p99_ms) }] }),
      chart({ key: "flows", title: "MRTR flows and limits per second", unit: "/s", times,
        series: [{ name: "completed", cls: "s0", values: points.map((p) => perSec(p, p.flows_completed)) },
          { name: "abandoned", cls: "e2", values: points.map((p) => perSec(p, p.flows_abandoned)) },
          { name: "limited", cls: "e0", values: points.map((p) => perSec(p, p.limited)) }] }),
    ];
  },
  // Requests and latency of the series named `name` in each point's `member` (pools, tools).
  of(points, member, name) {
    const times = points.map((p) => p.t);
    const pick = (p) => (p[member] || []).find((s) => s.name === name);
    return [
      chart({ key: `${member}:${name}:requests`, title: `${name}: requests and errors per second`, unit: "/s", times,
        series: [{ name: "requests", cls: "s0", values: points.map((p) => { const s = pick(p); return s ? (s.requests * 1000) / p.span_ms : 0; }) },
          { name: "errors", cls: "e0", values: points.map((p) => { const s = pick(p); return s ? (s.errors * 1000) / p.span_ms : 0; }) }] }),
      chart({ key: `${member}:${name}:latency`, title: `${name}: latency (ms)`, unit: "ms", times,
        series: [{ name: "p50", cls: "s0", values: points.map((p) => { const s = pick(p); return s ? s.p50_ms : null; }) },
          { name: "p99", cls: "s1", values: points.map((p) => { const s = pick(p); return s ? s.p99_ms : null; }) }] }),
    ];
  },
};
window.Charts = Charts;
