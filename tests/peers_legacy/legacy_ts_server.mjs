// A 2025-era MCP server written with the official TypeScript SDK v1 (@modelcontextprotocol/sdk
// 1.32: Streamable HTTP with sessions, protocol 2025-11-25), as most servers in production are,
// for the tests of a legacy pool behind mcp-edge. Its tools ask mid-call, on the call's own
// response stream: confirm_deploy (elicitation), ask_model (sampling), client_roots (roots),
// ask_twice (two questions, one after the other); add needs nothing; grow adds a tool to the
// session's server, which then says so on the session's standalone stream (list_changed).
// Usage: node legacy_ts_server.mjs PORT [INSTANCE-NAME]; with MCP_EDGE_TLS_CERT and
// MCP_EDGE_TLS_KEY (PEM files) it serves HTTPS instead.
import http from "node:http";
import https from "node:https";
import fs from "node:fs";
import { randomUUID } from "node:crypto";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { isInitializeRequest, ElicitResultSchema, CreateMessageResultSchema, ListRootsResultSchema } from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";

const port = Number(process.argv[2]);
const instance = process.argv[3] || `ts-v1-${port}`;
const transports = new Map();
let sessionsOpened = 0;

function build() {
  const server = new McpServer({ name: "legacy-ts-server", version: "1.0.0" }, { instructions: "A 2025-era server." });
  const text = (t) => ({ content: [{ type: "text", text: t }] });
  const elicit = (extra, message, props) =>
    extra.sendRequest({ method: "elicitation/create", params: { message, requestedSchema: { type: "object", properties: props, required: Object.keys(props) } } }, ElicitResultSchema);
  server.tool("add", "Adds two numbers.", { a: z.number(), b: z.number() }, async ({ a, b }) => text(`${a + b} (from ${instance})`));
  server.tool("confirm_deploy", "Deploys after asking the user to confirm.", { service: z.string(), environment: z.string() }, async ({ service, environment }, extra) => {
    const r = await elicit(extra, `Deploy ${service} to ${environment}?`, { confirm: { type: "boolean" } });
    if (r.action !== "accept" || !r.content?.confirm) return text(`deploy of ${service} cancelled`);
    return text(`deployed ${service} to ${environment} (asked by ${instance})`);
  });
  server.tool("ask_model", "Asks the client's model a question.", { question: z.string() }, async ({ question }, extra) => {
    const r = await extra.sendRequest({ method: "sampling/createMessage", params: { messages: [{ role: "user", content: { type: "text", text: question } }], maxTokens: 50 } }, CreateMessageResultSchema);
    return text(`the model said: ${r.content.text}`);
  });
  server.tool("client_roots", "Lists the client's roots.", {}, async (_args, extra) => {
    const r = await extra.sendRequest({ method: "roots/list" }, ListRootsResultSchema);
    return text(`roots: ${r.roots.map((x) => x.uri).join(", ")}`);
  });
  server.tool("ask_twice", "Asks a name, then a colour.", {}, async (_args, extra) => {
    const a = await elicit(extra, "Your name?", { name: { type: "string" } });
    const b = await elicit(extra, `Favourite colour, ${a.content?.name}?`, { colour: { type: "string" } });
    return text(`${a.content?.name} likes ${b.content?.colour}`);
  });
  let grown = 0;
  server.tool("grow", "Adds a tool to this session's server.", {}, async () => {
    grown++;
    const name = `grown_${grown}`;
    server.tool(name, "A tool added at run time.", {}, async () => text(name));
    return text(`added ${name}`);
  });
  return server;
}

const handler = async (req, res) => {
  if (req.url === "/stats") {
    res.writeHead(200, { "content-type": "application/json" });
    return res.end(JSON.stringify({ instance, sessionsOpen: transports.size, sessionsOpened }));
  }
  let body;
  if (req.method === "POST") {
    const chunks = [];
    for await (const c of req) chunks.push(c);
    try { body = JSON.parse(Buffer.concat(chunks).toString()); } catch { body = undefined; }
  }
  const sid = req.headers["mcp-session-id"];
  let transport = sid ? transports.get(sid) : undefined;
  if (!transport && req.method === "POST" && !sid && isInitializeRequest(body)) {
    transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (id) => { transports.set(id, transport); sessionsOpened++; },
    });
    transport.onclose = () => { if (transport.sessionId) transports.delete(transport.sessionId); };
    await build().connect(transport);
  }
  if (!transport) {
    res.writeHead(sid ? 404 : 400, { "content-type": "application/json" });
    return res.end(JSON.stringify({ jsonrpc: "2.0", error: { code: sid ? -32001 : -32000, message: sid ? "Session not found" : "Bad Request: No valid session ID provided" }, id: null }));
  }
  await transport.handleRequest(req, res, body);
};
const tls = process.env.MCP_EDGE_TLS_CERT
  ? { cert: fs.readFileSync(process.env.MCP_EDGE_TLS_CERT), key: fs.readFileSync(process.env.MCP_EDGE_TLS_KEY) }
  : null;
const httpServer = tls ? https.createServer(tls, handler) : http.createServer(handler);
httpServer.listen(port, "127.0.0.1", () => console.log(`listening ${port}`));
