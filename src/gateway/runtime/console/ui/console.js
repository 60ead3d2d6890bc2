// The mcp-edge console: polls /-/console.json every two seconds and renders it. Every value
// from the gateway goes into the page through textContent (names and messages come from
// clients), never as markup.
"use strict";

const history = []; // [{at, snap}] over the last minute
let last = null;

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v; else e.setAttribute(k, v);
  }
  for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(c == null ? "" : String(c)));
  return e;
}

function table(id, head, rows) {
  const t = document.getElementById(id);
  t.replaceChildren(el("tr", {}, ...head.map((h) => el("th", {}, h))));
  for (const r of rows) {
    t.append(el("tr", {}, ...r.map((c) => (c instanceof Node ? el("td", {}, c) : el("td", typeof c === "number" ? { class: "n" } : {}, c)))));
  }
}

function card(k, v) {
  return el("div", { class: "card" }, el("div", { class: "v", "data-key": k }, v), el("div", { class: "k" }, k));
}

function fmt(n) {
  if (n == null) return "–";
  if (typeof n !== "number") return String(n);
  return Number.isInteger(n) ? n.toLocaleString("en") : n.toFixed(2);
}

// The q-quantile (0..1) of the requests between two cumulative histograms, in ms.
function quantile(a, b, q) {
  const d = b.map(([le, n], i) => [le, n - (a[i] ? a[i][1] : 0)]);
  const total = d.length ? d[d.length - 1][1] : 0;
  if (total <= 0) return null;
  for (const [le, n] of d) if (n >= q * total) return le * 1000;
  return null;
}

function overview(s) {
  const t = s.totals;
  document.getElementById("cards").replaceChildren(
    card("requests", fmt(t.requests)),
    card("client errors", fmt(t.by_side.client || 0)),
    card("gateway errors", fmt(t.by_side.gateway || 0)),
    card("upstream errors", fmt(t.by_side.upstream || 0)),
    card("refused spoofs", fmt(t.spoofs_refused)),
    card("MRTR retry legs", fmt(t.retry_legs)),
    card("input_required", fmt(t.input_required)),
    card("cache hits", fmt(t.cache_hits)),
    card("tasks routed", fmt(t.tasks_routed)),
  );
  const first = history[0];
  const secs = first ? (s.at_unix_ms - first.snap.at_unix_ms) / 1000 : 0;
  const rate = (f) => (secs > 0 ? (f(s) - f(first.snap)) / secs : null);
  const side = (k) => (x) => x.totals.by_side[k] || 0;
  const errs = (x) => side("client")(x) + side("gateway")(x) + side("upstream")(x);
  document.getElementById("rates").replaceChildren(
    card("requests/s", fmt(rate((x) => x.totals.requests))),
    card("errors/s", fmt(rate(errs))),
    card("p50 ms", fmt(first ? quantile(first.snap.latency_buckets, s.latency_buckets, 0.5) : null)),
    card("p99 ms", fmt(first ? quantile(first.snap.latency_buckets, s.latency_buckets, 0.99) : null)),
  );
}

function routes(s) {
  table("route-table", ["route", "method", "name", "pool", "requests", "errors"],
    s.routes.routes.map((r) => [r.name, r.method || "*", r.match_name || "*", r.pool, r.requests, r.errors]));
  table("limit-table", ["limit", "allowed", "limited", "dry run limited"],
    s.routes.limits.map((l) => [l.name, l.allowed || 0, l.limited || 0, l.dry_run_limited || 0]));
}

function pools(s) {
  const list = document.getElementById("pool-list");
  list.replaceChildren();
  for (const p of s.pools) {
    list.append(el("h2", {}, `${p.name} (${p.balance}, checks every ${p.health_interval_s}s)`));
    const t = el("table", { "data-pool": p.name });
    t.append(el("tr", {}, ...["instance", "state", "in flight", "latency ms", "weight", "requests", "errors"].map((h) => el("th", {}, h))));
    for (const i of p.instances) {
      const state = i.ejected_for_s != null ? el("span", { class: "ejected" }, `ejected ${i.ejected_for_s.toFixed(0)}s`)
        : i.usable ? el("span", { class: "up" }, "up") : el("span", { class: "down" }, "down");
      t.append(el("tr", { "data-instance": i.name }, el("td", {}, i.name), el("td", { class: "state" }, state),
        el("td", { class: "n" }, i.in_flight), el("td", { class: "n" }, fmt(i.latency_ms)), el("td", { class: "n" }, fmt(i.weight)),
        el("td", { class: "n" }, i.requests), el("td", { class: "n" }, i.errors)));
    }
    list.append(t);
  }
}

function tools(s) {
  table("tool-table", ["tool", "calls", "errors", "retry legs", "input_required"],
    s.tools.map((t) => [t.name, t.calls, t.errors, t.retry_legs, t.input_required]));
}

function refusals(s) {
  table("refusal-table", ["time", "side", "status", "code", "reason", "route", "claimed", "body said", "caller", "instance", "message"],
    s.refusals.map((r) => [new Date(r.at_unix_ms).toISOString().slice(11, 23), r.side, r.status, r.code, r.reason, r.route,
      `${r.claimed_method || ""} ${r.claimed_name || ""}`, `${r.body_method || ""} ${r.body_name || ""}`, r.caller, r.instance, r.message]));
}

function stages(s) {
  table("stage-table", ["stage", "needs", "kind", "on"],
    (s.stages || []).map((t) => [t.stage, t.needs, t.kind, t.on ? "on" : "off"]));
}

function config(s) {
  const r = s.config.last_reload;
  document.getElementById("reload").textContent = r == null ? "no reload since start"
    : `${new Date(r.at_unix_ms).toISOString()}: ${r.ok ? "applied" : "refused: " + r.error}`;
  const warn = (s.config.certificate_warnings || []).map((w) => `warning: ${w}\n`).join("");
  document.getElementById("config-text").textContent = warn + s.config.resolved;
  document.getElementById("catalog-text").textContent = s.catalog == null ? "no federation: configure federation: to see catalogs" : JSON.stringify(s.catalog, null, 2);
}

async function poll() {
  try {
    const r = await fetch("/-/console.json", { cache: "no-store" });
    const s = await r.json();
    last = s;
    history.push({ at: Date.now(), snap: s });
    while (history.length > 1 && s.at_unix_ms - history[0].snap.at_unix_ms > 60000) history.shift();
    overview(s); routes(s); pools(s); tools(s); refusals(s); config(s); stages(s);
    document.getElementById("status").textContent = `mcp-edge ${s.version} · updated ${new Date(s.at_unix_ms).toISOString().slice(11, 19)}`;
    document.body.dataset.polls = String((Number(document.body.dataset.polls) || 0) + 1);
  } catch (e) {
    document.getElementById("status").textContent = `cannot reach the admin listener: ${e}`;
  }
}

async function explain() {
  const out = document.getElementById("explain-verdict");
  let headers;
  try { headers = JSON.parse(document.getElementById("explain-headers").value); } catch (e) { out.textContent = `headers: ${e}`; return; }
  const body = document.getElementById("explain-body").value;
  const r = await fetch("/-/explain", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ headers, body }) });
  const v = await r.json();
  out.replaceChildren(el("p", {}, `verdict: ${v.verdict}, decided by ${v.decided_by || "–"}`,
    v.answer ? ` — HTTP ${v.answer.status}, JSON-RPC ${v.answer.code}: ${v.answer.message}` : ""));
  table("explain-steps", ["step", "outcome", "detail"], (v.steps || []).map((s) => [s.step, el("span", { class: s.outcome }, s.outcome), JSON.stringify(s.detail)]));
}

document.addEventListener("DOMContentLoaded", () => {
  for (const b of document.querySelectorAll("#tabs button")) {
    b.addEventListener("click", () => {
      for (const x of document.querySelectorAll("#tabs button, .tab")) x.classList.remove("on");
      b.classList.add("on");
      document.getElementById(b.dataset.tab).classList.add("on");
    });
  }
  document.getElementById("explain-go").addEventListener("click", explain);
  poll();
  setInterval(poll, 2000);
});
