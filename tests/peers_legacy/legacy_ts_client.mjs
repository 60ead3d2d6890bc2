// A 2025-era client written with the official TypeScript SDK v1 (@modelcontextprotocol/sdk,
// protocol 2025-11-25, sessions, server-initiated elicitation/sampling/roots), for the protocol
// bridge's tests. It connects to argv[2], lists the tools, calls each tool named in argv[3]
// (";"-separated, as name or name=JSON-arguments), answering every mid-call question the way a
// person and a model would, and prints one JSON line: what it saw.
// MCP_EDGE_ANSWERS_URL (optional): POST the client's answers to this URL instead (another gateway
// replica), while everything else goes to argv[2].
// MCP_EDGE_SUBSCRIBE (optional): a resource URI to subscribe to once the standalone stream is
// open (a tool change announced then reached it), before the calls; the URIs of the
// notifications/resources/updated that arrive (waiting at most 10 s for one of that URI after
// the calls) are printed as `updated`.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import {
  ElicitRequestSchema,
  CreateMessageRequestSchema,
  ListRootsRequestSchema,
  ResourceUpdatedNotificationSchema,
  ToolListChangedNotificationSchema,
} from "@modelcontextprotocol/sdk/types.js";

const url = new URL(process.argv[2]);
const calls = (process.argv[3] || "").split(";").filter(Boolean);
const answersUrl = process.env.MCP_EDGE_ANSWERS_URL;
const subscribeTo = process.env.MCP_EDGE_SUBSCRIBE;
const asked = [];
let answersSentElsewhere = 0;

// Answers (JSON-RPC responses, no method) go to the other replica when asked to.
const fetchSplit = async (input, init) => {
  if (answersUrl && init?.method === "POST" && typeof init.body === "string") {
    const msg = JSON.parse(init.body);
    if (msg.method === undefined && msg.id !== undefined) {
      answersSentElsewhere++;
      return fetch(answersUrl, init);
    }
  }
  return fetch(input, init);
};

const client = new Client(
  { name: "legacy-ts-client", version: "1.0.0" },
  { capabilities: { elicitation: {}, sampling: {}, roots: { listChanged: false } } },
);
client.setRequestHandler(ElicitRequestSchema, async (req) => {
  asked.push("elicitation/create");
  const props = req.params.requestedSchema?.properties || {};
  const content = {};
  for (const [k, p] of Object.entries(props)) {
    content[k] = p.type === "boolean" ? true : p.type === "number" || p.type === "integer" ? 1 : p.enum ? p.enum[0] : "Ada";
  }
  return { action: "accept", content };
});
client.setRequestHandler(CreateMessageRequestSchema, async () => {
  asked.push("sampling/createMessage");
  return { role: "assistant", content: { type: "text", text: "Paris" }, model: "test-model", stopReason: "endTurn" };
});
client.setRequestHandler(ListRootsRequestSchema, async () => {
  asked.push("roots/list");
  return { roots: [{ uri: "file:///work", name: "work" }] };
});

// Notifications on the standalone stream: each wakes whoever waits for the next one.
const updated = [];
let toolChanges = 0;
let wake = () => {};
const nextNotification = (ms) =>
  new Promise((resolve) => {
    const t = setTimeout(resolve, ms);
    wake = () => { clearTimeout(t); resolve(); };
  });
client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => { updated.push(n.params.uri); wake(); });
client.setNotificationHandler(ToolListChangedNotificationSchema, () => { toolChanges++; wake(); });

// The standalone stream opens in the background after initialize: it is open once a tool change
// announced now reaches it (at most 20 tries of 500 ms).
async function streamOpen() {
  for (let i = 0; i < 20 && toolChanges === 0; i++) {
    const heard = nextNotification(500);
    await client.callTool({ name: "test_trigger_tool_change", arguments: {} });
    await heard;
  }
  return toolChanges > 0;
}

const transport = new StreamableHTTPClientTransport(url, { fetch: fetchSplit });
const out = { ok: true };
try {
  await client.connect(transport);
  out.sessionId = transport.sessionId ? "present" : "absent";
  out.protocolVersion = transport.protocolVersion;
  out.server = client.getServerVersion();
  const tools = await client.listTools();
  out.tools = tools.tools.map((t) => t.name);
  if (subscribeTo) {
    out.streamOpen = await streamOpen();
    await client.subscribeResource({ uri: subscribeTo });
  }
  out.results = {};
  for (const c of calls) {
    const [name, args] = c.includes("=") ? [c.slice(0, c.indexOf("=")), JSON.parse(c.slice(c.indexOf("=") + 1))] : [c, {}];
    const r = await client.callTool({ name, arguments: args });
    out.results[name] = { isError: !!r.isError, text: (r.content || []).map((x) => x.text).join(" ") };
  }
  if (subscribeTo) {
    const until = Date.now() + 10000;
    while (!updated.includes(subscribeTo) && Date.now() < until) {
      await nextNotification(until - Date.now());
    }
    await client.unsubscribeResource({ uri: subscribeTo });
  }
  await client.ping();
  await transport.terminateSession();
} catch (e) {
  out.ok = false;
  out.error = String(e && e.stack ? e.stack : e);
}
out.asked = asked;
out.updated = updated;
out.answersSentElsewhere = answersSentElsewhere;
console.log(JSON.stringify(out));
await client.close().catch(() => {});
process.exit(0);
