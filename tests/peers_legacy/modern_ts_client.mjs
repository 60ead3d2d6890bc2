// A 2026-07-28 client written with the official TypeScript SDK v2 (@modelcontextprotocol/client,
// modern era pinned), for the tests of a pool of 2025-era servers behind mcp-edge: it lists the
// tools and calls each one named in argv[3] (";"-separated, name or name=JSON-arguments); its
// handlers answer the input requests of every input_required (elicitation, sampling, roots), and
// the SDK retries with the requestState. Prints one JSON line of what it saw.
// MCP_EDGE_RETRY_URL (optional): send every request that carries a requestState (the retries)
// to this URL instead (another gateway replica). MCP_EDGE_TS_SDK_DIR resolves the SDK.
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";

const url = new URL(process.argv[2]);
const calls = (process.argv[3] || "").split(";").filter(Boolean);
const retryUrl = process.env.MCP_EDGE_RETRY_URL;
const asked = [];
let retriesElsewhere = 0;

const fetchSplit = async (input, init) => {
  if (retryUrl && typeof init?.body === "string" && init.body.includes('"requestState"')) {
    retriesElsewhere++;
    return fetch(retryUrl, init);
  }
  return fetch(input, init);
};

const client = new Client(
  { name: "modern-ts-client", version: "1.0.0" },
  { capabilities: { elicitation: {}, sampling: {}, roots: {} }, versionNegotiation: { mode: { pin: "2026-07-28" } } },
);
client.setRequestHandler("elicitation/create", async (req) => {
  asked.push("elicitation/create");
  const props = req.params.requestedSchema?.properties || {};
  const content = {};
  for (const [k, p] of Object.entries(props)) content[k] = p.type === "boolean" ? true : p.type === "number" || p.type === "integer" ? 1 : "Ada";
  return { action: "accept", content };
});
client.setRequestHandler("sampling/createMessage", async () => {
  asked.push("sampling/createMessage");
  return { role: "assistant", content: { type: "text", text: "Paris" }, model: "test-model", stopReason: "endTurn" };
});
client.setRequestHandler("roots/list", async () => {
  asked.push("roots/list");
  return { roots: [{ uri: "file:///work", name: "work" }] };
});

const out = { ok: true };
try {
  await client.connect(new StreamableHTTPClientTransport(url, { fetch: fetchSplit }));
  out.server = client.getServerVersion();
  const tools = await client.listTools();
  out.tools = tools.tools.map((t) => t.name);
  out.results = {};
  for (const c of calls) {
    const [name, args] = c.includes("=") ? [c.slice(0, c.indexOf("=")), JSON.parse(c.slice(c.indexOf("=") + 1))] : [c, {}];
    const r = await client.callTool({ name, arguments: args });
    out.results[name] = { isError: !!r.isError, text: (r.content || []).map((x) => x.text).join(" ") };
  }
} catch (e) {
  out.ok = false;
  out.error = String(e && e.stack ? e.stack : e);
}
out.asked = asked;
out.retriesElsewhere = retriesElsewhere;
console.log(JSON.stringify(out));
await client.close().catch(() => {});
process.exit(0);
