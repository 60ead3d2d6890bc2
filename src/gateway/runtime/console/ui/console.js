// The mcp-edge console: polls /-/console.json and /-/history every two seconds and renders
// them; the charts (charts.js) draw the gateway's own history, so a page opened during an
// incident shows the minutes before it. A tab is a URL (/ui#pools or /ui/pools). Every value
// from the gateway goes into the page through textContent (names and messages come from
// clients), never as markup.
"use strict";

let last = null;
let hist = null; // the last /-/history answer
const TABS = ["overview", "topology", "routes", "pools", "tools", "refusals", "catalog", "config", "explain"];

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

// A number for the page: `–` for none, never `-0` (a float sum of nothing is -0 on the wire,
// and a rate rounds to it).
function fmt(n) {
  if (n == null || Number.isNaN(n)) return "–";
  if (typeof n !== "number") return String(n);
  if (Math.abs(n) < 0.005) return "0";
  return Number.isInteger(n) ? n.toLocaleString("en") : n.toFixed(2);
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
  // The last minute, from the gateway's own per-second history (not from what this page saw).
  const pts = points().slice(-60);
  const secs = pts.reduce((a, p) => a + p.span_ms, 0) / 1000;
  const sum = (f) => pts.reduce((a, p) => a + f(p), 0);
  const reqs = sum((p) => p.requests);
  const errs = sum((p) => p.errors.client + p.errors.upstream + p.errors.gateway);
  const weighted = reqs > 0 ? sum((p) => (p.p50_ms == null ? 0 : p.p50_ms * p.requests)) / reqs : null;
  const worst = pts.reduce((m, p) => (p.p99_ms != null && (m == null || p.p99_ms > m) ? p.p99_ms : m), null);
  document.getElementById("rates").replaceChildren(
    card("requests/s", fmt(secs > 0 ? reqs / secs : null)),
    card("errors/s", fmt(secs > 0 ? errs / secs : null)),
    card("p50 ms", fmt(weighted)),
    card("worst p99 ms (1 s)", fmt(worst)),
  );
}

function routes(s) {
  table("route-table", ["route", "method", "name", "pool", "requests", "errors"],
    s.routes.routes.map((r) => [r.name, r.method || "*", r.match_name || "*", r.pool, r.requests, r.errors]));
  table("limit-table", ["limit", "allowed", "limited", "dry run limited"],
    s.routes.limits.map((l) => [l.name, l.allowed || 0, l.limited || 0, l.dry_run_limited || 0]));
}

// Eras: what each pool speaks, which clients each endpoint serves, and what the protocol bridge
// holds now (docs/bridge.md).
function eras(s) {
  const e = s.eras;
  if (!e) return;
  table("era-table", ["endpoint", "2026-07-28 clients", "2025-era clients"],
    e.endpoints.map((x) => [x.endpoint, "served", {
      pass: "passed through to the pool (pinned sessions)",
      bridge: "served through the bridge",
    }[x.legacy_clients] || "refused (-32022)"]));
  const total = (o) => Object.values(o || {}).reduce((a, b) => a + b, 0);
  const c = e.legacy_clients, v = e.legacy_servers;
  document.getElementById("bridge-cards").replaceChildren(
    card("2025-era client sessions opened", total(c.sessions_opened)),
    card("calls waiting for a 2025-era client's answers", c.calls_waiting),
    card("2025-era GET streams open", c.streams_open),
    card("bridged flows completed", (c.flows || {}).completed || 0),
    card("2025-era messages passed through", total(c.passed)),
    card("sessions open with 2025-era servers", v.sessions_open),
    card("server calls paused for an answer", v.calls_paused),
    card("server sessions re-opened", (v.sessions || {}).reopened || 0),
  );
}

function pools(s) {
  eras(s);
  const era = Object.fromEntries(((s.eras || {}).pools || []).map((p) => [p.pool, p.era]));
  const found = Object.fromEntries(((s.eras || {}).pools || []).map((p) => [p.pool, p.found]));
  const list = document.getElementById("pool-list");
  list.replaceChildren();
  for (const p of s.pools) {
    list.append(el("h2", { "data-era": era[p.name] || "" }, `${p.name} (speaks ${era[p.name] || "?"}, ${p.balance}, checks every ${p.health_interval_s}s)`));
    if (found[p.name]) list.append(el("p", { class: "era-found", "data-era-found": p.name }, `era check: ${found[p.name]}`));
    const c = p.concurrency;
    if (c) {
      const how = c.adaptive ? `adaptive ${c.min}..${c.max}${c.min_rtt_ms != null ? `, best ${fmt(c.min_rtt_ms)} ms` : ""}${c.probing ? ", probing" : ""}` : "fixed";
      list.append(el("p", { class: "pool-limit", "data-pool-limit": p.name },
        `concurrency limit ${c.limit} (${how}; new calls ${c.first_leg_limit}), in flight ${c.in_flight}`));
      for (const t of c.tools) {
        list.append(el("p", { class: "pool-limit", "data-tool-limit": `${p.name}/${t.tool}` },
          `tool ${t.tool}: limit ${t.limit} (${t.adaptive ? "adaptive" : "fixed"}; new calls ${t.first_leg_limit}), in flight ${t.in_flight}`));
      }
    }
    list.append(el("div", { class: "charts", "data-pool-charts": p.name }));
    const t = el("table", { "data-pool": p.name });
    t.append(el("tr", {}, ...["instance", "state", "in flight", "latency ms", "weight", "requests", "errors"].map((h) => el("th", {}, h))));
    for (const i of p.instances) {
      const state = i.ejected_for_s != null ? el("span", { class: "ejected" }, `ejected${i.outlier ? " (slow)" : ""} ${i.ejected_for_s.toFixed(0)}s`)
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
  // Pinned definitions that changed: held (hold pools) or flagged, the pinned one against the
  // one served now (docs/pins.md).
  const def = (side) => el("pre", {}, side ? JSON.stringify(side.definition, null, 1) : "(none)");
  table("pin-table", ["pool", "kind", "name", "", "pinned", "served now", "approve with"],
    (s.pins || []).map((p) => [p.pool, p.kind, p.name, p.policy === "hold" ? "held" : "flagged",
      def(p.pinned), def(p.current), `mcp-edge pins approve --pool ${p.pool} --${p.kind === "prompts" ? "prompt" : "tool"} ${p.name}`]));
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

// The history's points of the range chosen (per second: 5 min; per minute: 1 h).
function points() {
  if (!hist) return [];
  const range = document.getElementById("range");
  return (range && range.value === "minutes" ? hist.minutes : hist.seconds).points;
}

// Replace a chart container's charts, keeping the keyboard focus on the chart it was on.
function drawCharts(id, figures) {
  const box = document.getElementById(id);
  if (!box) return;
  const focused = document.activeElement && document.activeElement.dataset ? document.activeElement.dataset.chart : null;
  box.replaceChildren(...figures);
  if (focused) {
    const again = box.querySelector(`[data-chart="${CSS.escape(focused)}"]`);
    if (again) again.focus();
  }
}

function charts() {
  const pts = points();
  drawCharts("overview-charts", Charts.overview(pts));
  for (const box of document.querySelectorAll("[data-pool-charts]")) {
    box.replaceChildren(...Charts.of(pts, "pools", box.dataset.poolCharts));
  }
  // The tools busiest over the range, three at most.
  const calls = {};
  for (const p of pts) for (const t of p.tools) calls[t.name] = (calls[t.name] || 0) + t.requests;
  const top = Object.entries(calls).sort((a, b) => b[1] - a[1]).slice(0, 3).map(([n]) => n);
  drawCharts("tool-charts", top.flatMap((n) => Charts.of(pts, "tools", n)));
}

// Endpoints → pools → instances, with health, load, latency and (federated) catalog state.
function topology(s) {
  const box = document.getElementById("topology-view");
  const cat = s.catalog && s.catalog.pools ? s.catalog : null;
  const routed = [...new Set(s.routes.routes.map((r) => r.pool))];
  const eps = [];
  const fed = cat ? cat.endpoints : [];
  if (!fed.some((e) => e.path === s.endpoint)) eps.push({ path: s.endpoint, pools: routed, how: "routes" });
  for (const e of fed) eps.push({ path: e.path, pools: e.pools, how: `federated, collisions: ${e.collisions_policy}` });
  const byName = Object.fromEntries(s.pools.map((p) => [p.name, p]));
  box.replaceChildren(...eps.map((e) => el("div", { class: "ep", "data-endpoint": e.path },
    el("div", { class: "ep-head" }, el("strong", {}, `POST ${e.path}`), ` (${e.how})`),
    el("div", { class: "ep-pools" }, ...e.pools.map((name) => {
      const p = byName[name];
      const state = cat && cat.pools[name] ? cat.pools[name].state : null;
      const instances = p ? p.instances : [];
      const up = instances.filter((i) => i.usable).length;
      return el("div", { class: `tp ${up === 0 ? "tp-down" : ""}`, "data-topology-pool": name },
        el("div", { class: "tp-head" }, el("strong", {}, name), ` ${p ? p.balance : ""} · ${up}/${instances.length} up`,
          state ? el("span", { class: `cat cat-${state}` }, ` catalog ${state}`) : ""),
        el("ul", {}, ...instances.map((i) => {
          const health = i.ejected_for_s != null ? "ejected" : i.usable ? "up" : "down";
          return el("li", { class: `ti h-${health}`, "data-instance": i.name },
            el("span", { class: "mark" }, health === "up" ? "●" : "○"), ` ${i.name} `, el("b", {}, health + (i.outlier ? " (slow)" : "")),
            ` · ${fmt(i.in_flight)} in flight · ${fmt(i.latency_ms)} ms`);
        })));
    })))));
}

async function poll() {
  try {
    const [r, h] = await Promise.all([fetch("/-/console.json", { cache: "no-store" }), fetch("/-/history", { cache: "no-store" })]);
    const s = await r.json();
    hist = await h.json();
    last = s;
    overview(s); routes(s); pools(s); tools(s); refusals(s); config(s); stages(s); topology(s); charts();
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

// The tab a URL names: /ui#pools or /ui/pools; the overview otherwise.
function tabOf(loc) {
  const h = loc.hash.replace(/^#/, "");
  if (TABS.includes(h)) return h;
  const p = loc.pathname.replace(/^\/ui\/?/, "");
  return TABS.includes(p) ? p : "overview";
}

function openTab(tab, focus) {
  for (const b of document.querySelectorAll("#tabs [data-tab]")) {
    const on = b.dataset.tab === tab;
    b.classList.toggle("on", on);
    b.setAttribute("aria-selected", String(on));
    b.tabIndex = on ? 0 : -1;
    if (on && focus) b.focus();
  }
  for (const t of document.querySelectorAll(".tab")) t.classList.toggle("on", t.id === tab);
  document.title = `mcp-edge console · ${tab}`;
}

document.addEventListener("DOMContentLoaded", () => {
  const tabs = [...document.querySelectorAll("#tabs [data-tab]")];
  for (const b of tabs) {
    // A link: middle-click and copy work; a plain click changes the hash (the address to share).
    b.addEventListener("keydown", (ev) => {
      const i = tabs.indexOf(b);
      const to = ev.key === "ArrowRight" ? tabs[(i + 1) % tabs.length] : ev.key === "ArrowLeft" ? tabs[(i + tabs.length - 1) % tabs.length] : null;
      if (to) { ev.preventDefault(); location.hash = to.dataset.tab; openTab(to.dataset.tab, true); }
    });
  }
  window.addEventListener("hashchange", () => openTab(tabOf(location), false));
  document.getElementById("range").addEventListener("change", charts);
  openTab(tabOf(location), false);
  document.getElementById("explain-go").addEventListener("click", explain);
  poll();
  setInterval(poll, 2000);
});
