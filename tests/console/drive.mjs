// Drives the system Chromium (puppeteer-core) through the mcp-edge console against a running
// gateway the Rust test set up (tests/gateway/console/page.rs). Every check throws on failure; each page
// is kept as a screenshot under SHOTS. Exits 0 only when every check passed.
import puppeteer from "puppeteer-core";

const env = (k) => {
  const v = process.env[k];
  if (!v) throw new Error(`${k} is not set`);
  return v;
};
const ADMIN = env("ADMIN"), SHOTS = env("SHOTS"), DOWN = env("EXPECT_DOWN");
const CLAIMED = env("EXPECT_CLAIMED"), BODY = env("EXPECT_BODY"), RELOAD = env("EXPECT_RELOAD_ERROR");
// Requests sent before the page was opened: the charts must show them (the gateway's history).
const BEFORE = Number(env("EXPECT_REQUESTS_BEFORE"));
const TABS = ["overview", "topology", "routes", "pools", "tools", "refusals", "catalog", "config", "explain"];

const browser = await puppeteer.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
});
const problems = [];
try {
  const page = await browser.newPage();
  await page.setViewport({ width: 1280, height: 900 });
  page.on("console", (m) => { if (m.type() === "error") problems.push(`console: ${m.text()}`); });
  page.on("pageerror", (e) => problems.push(`page: ${e.message}`));
  page.on("requestfailed", (r) => problems.push(`request failed: ${r.url()}`));
  page.on("response", (r) => { if (r.status() >= 400) problems.push(`HTTP ${r.status()}: ${r.url()}`); });
  await page.goto(`${ADMIN}/ui`, { waitUntil: "load" });
  await page.waitForFunction(() => Number(document.body.dataset.polls || 0) >= 2, { timeout: 15000 });

  // Overview: the request count is /metrics' (no traffic runs while the page is read).
  const fromMetrics = await page.evaluate(async () => {
    const text = await (await fetch("/metrics")).text();
    return text.split("\n").filter((l) => l.startsWith("mcp_edge_requests_total{"))
      .reduce((s, l) => s + Number(l.split(" ").pop()), 0);
  });
  await page.waitForFunction(() => Number(document.body.dataset.polls || 0) >= 3, { timeout: 15000 });
  const shown = await page.$eval('[data-key="requests"]', (e) => Number(e.textContent.replace(/,/g, "")));
  if (shown !== fromMetrics) throw new Error(`overview shows ${shown} requests, /metrics ${fromMetrics}`);
  // No `-0` anywhere on the overview (the tasks card once showed it).
  const minusZero = await page.$eval("#overview", (e) => (e.textContent.match(/(^|[^\w.])-0(?![\d.])/) || [null])[0]);
  if (minusZero) throw new Error(`the overview shows -0: ${minusZero}`);

  // Charts: drawn from the gateway's history, so the load sent before the page was opened shows.
  const charted = await page.$eval('svg[data-chart="requests"]', (e) => ({ total: Number(e.dataset.total), points: Number(e.dataset.points), path: !!e.querySelector("path.line") }));
  if (Math.round(charted.total) < BEFORE || !charted.path) throw new Error(`the requests chart shows ${JSON.stringify(charted)}, expected ${BEFORE} requests sent before the page was opened`);
  for (const key of ["errors", "latency", "flows"]) {
    if (!(await page.$(`svg[data-chart="${key}"] path.line`))) throw new Error(`no ${key} chart line`);
  }
  // Hover: the value at the pointer.
  const box = await (await page.$('svg[data-chart="requests"]')).boundingBox();
  await page.mouse.move(box.x + box.width - 15, box.y + box.height / 2);
  const tip = await page.$eval('svg[data-chart="requests"] .tip', (e) => e.textContent);
  if (!/req\/s/.test(tip)) throw new Error(`hovering the requests chart shows ${JSON.stringify(tip)}`);
  await page.screenshot({ path: `${SHOTS}/overview.png`, fullPage: true });

  const tab = async (name) => {
    await page.click(`[data-tab="${name}"]`);
    await page.waitForSelector(`#${name}.on`);
  };

  // Keyboard: from a focused tab, the arrow key opens the next one and its address.
  await page.focus('[data-tab="overview"]');
  await page.keyboard.press("ArrowRight");
  await page.waitForSelector("#topology.on");
  if (!page.url().endsWith("#topology")) throw new Error(`the arrow key left the address at ${page.url()}`);

  // The topology: the instance that died shows down under its pool.
  await page.waitForFunction((down) => {
    const li = document.querySelector(`#topology-view [data-instance="${down}"]`);
    return li && /down|ejected/.test(li.className);
  }, { timeout: 15000 }, DOWN);
  await page.screenshot({ path: `${SHOTS}/topology.png` });

  await tab("pools");
  await page.waitForFunction((down) => {
    const row = document.querySelector(`tr[data-instance="${down}"] .state`);
    return row && /down|ejected/.test(row.textContent);
  }, { timeout: 15000 }, DOWN);
  await page.waitForSelector('[data-pool-charts] svg[data-chart$=":requests"] path.line');
  // The eras: the pool speaks 2026-07-28, the endpoint serves 2025-era clients through the bridge.
  await page.waitForSelector('#pool-list h2[data-era="2026-07-28"]');
  const eras = await page.$eval("#era-table", (t) => t.textContent);
  if (!eras.includes("/mcp") || !eras.includes("served through the bridge")) throw new Error(`eras table: ${eras}`);
  await page.waitForSelector('#bridge-cards [data-key="2025-era client sessions opened"]');
  await page.screenshot({ path: `${SHOTS}/pools.png`, fullPage: true });

  await tab("refusals");
  await page.waitForFunction((claimed, body) => [...document.querySelectorAll("#refusal-table tr")]
    .some((tr) => tr.textContent.includes(`tools/call ${claimed}`) && tr.textContent.includes(`tools/call ${body}`)),
  { timeout: 15000 }, CLAIMED, BODY);
  await page.screenshot({ path: `${SHOTS}/refusals.png` });

  await tab("config");
  const reload = await page.$eval("#reload", (e) => e.textContent);
  if (!reload.includes("refused") || !reload.includes(RELOAD)) throw new Error(`config page says: ${reload}`);
  await page.screenshot({ path: `${SHOTS}/config.png` });

  for (const t of ["routes", "tools", "catalog"]) {
    await tab(t);
    await page.screenshot({ path: `${SHOTS}/${t}.png` });
  }

  await tab("explain");
  await page.click("#explain-go");
  await page.waitForFunction(() => document.querySelector("#explain-verdict").textContent.includes("verdict"), { timeout: 15000 });
  const verdict = await page.$eval("#explain-verdict", (e) => e.textContent);
  if (!verdict.includes("forwarded")) throw new Error(`explain says: ${verdict}`);
  // The pipeline's stages, named from the list the proxy runs, in its order.
  const stages = await page.$$eval("#stage-table tr", (rows) => rows.map((r) => r.cells[0]?.textContent));
  const order = ["admit", "route", "auth", "limits", "check", "balance"].map((s) => stages.indexOf(s));
  if (order.some((i) => i < 0) || order.some((i, n) => n > 0 && i < order[n - 1])) {
    throw new Error(`the pipeline table lists: ${stages.join(", ")}`);
  }
  await page.screenshot({ path: `${SHOTS}/explain.png` });

  // Every tab opens from its address, as /ui#<tab> and as /ui/<tab> (deep links on load).
  for (const t of TABS) {
    for (const url of [`${ADMIN}/ui#${t}`, `${ADMIN}/ui/${t}`]) {
      await page.goto("about:blank");
      await page.goto(url, { waitUntil: "load" });
      await page.waitForSelector(`#${t}.on`, { timeout: 5000 });
      const on = await page.$$eval(".tab.on", (xs) => xs.map((x) => x.id));
      const link = await page.$eval(`[data-tab="${t}"]`, (e) => e.getAttribute("aria-selected"));
      if (on.length !== 1 || on[0] !== t || link !== "true") throw new Error(`${url} opened ${on} (aria-selected ${link})`);
    }
  }

  if (problems.length) throw new Error(`the page reported: ${problems.join("; ")}`);
  console.log(JSON.stringify({ ok: true, requests: shown, reload, verdict }));
} finally {
  await browser.close();
}
