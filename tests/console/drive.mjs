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
  await page.screenshot({ path: `${SHOTS}/overview.png` });

  const tab = async (name) => {
    await page.click(`button[data-tab="${name}"]`);
    await page.waitForSelector(`#${name}.on`);
  };

  await tab("pools");
  await page.waitForFunction((down) => {
    const row = document.querySelector(`tr[data-instance="${down}"] .state`);
    return row && /down|ejected/.test(row.textContent);
  }, { timeout: 15000 }, DOWN);
  await page.screenshot({ path: `${SHOTS}/pools.png` });

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

  if (problems.length) throw new Error(`the page reported: ${problems.join("; ")}`);
  console.log(JSON.stringify({ ok: true, requests: shown, reload, verdict }));
} finally {
  await browser.close();
}
