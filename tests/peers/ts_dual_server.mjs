// A server of both eras written with the official TypeScript SDK v2, as the SDK tells a team to
// keep its 2025-era deployment next to a strict 2026 endpoint: requests that carry `Mcp-Method`
// go to `createMcpHandler` (2026-07-28, stateless); the others (`initialize`, session requests,
// the standalone GET, DELETE) to a sessionful streamable HTTP transport, one per session. Used by
// tests/gateway/bridge/pass.rs: the gateway passes 2025-era clients through to such a pool,
// each session pinned to the instance that opened it.
// Usage: node ts_dual_server.mjs PORT INSTANCE_NAME
// Tools: whoami (which instance, which session), confirm (asks the user mid-call: on the legacy
// leg the SDK's shim sends elicitation/create on the call's stream, on the modern leg it answers
// input_required).
import http from 'node:http';
import { randomUUID } from 'node:crypto';
import { McpServer, createMcpHandler, inputRequired, acceptedContent } from '@modelcontextprotocol/server';
import { toNodeHandler, NodeStreamableHTTPServerTransport } from '@modelcontextprotocol/node';
import { z } from 'zod';

const [port, instance] = process.argv.slice(2);

function build(sessionOf) {
  const server = new McpServer({ name: 'ts-dual', version: '1.0.0' });
  server.registerTool('whoami', {
    description: 'Which instance and session serve this call',
    inputSchema: z.object({}),
  }, async () => ({ content: [{ type: 'text', text: `instance ${instance} session ${sessionOf() ?? 'none'}` }] }));
  server.registerTool('confirm', {
    description: 'Asks the user to confirm, then says who answered',
    inputSchema: z.object({ what: z.string() }),
  }, async ({ what }, ctx) => {
    const answer = acceptedContent(ctx.mcpReq.inputResponses, 'ok', z.object({ confirm: z.boolean(), name: z.string() }));
    if (answer === undefined) {
      return inputRequired({
        inputRequests: { ok: inputRequired.elicit({ message: `Confirm ${what}?`,
          requestedSchema: z.object({ confirm: z.boolean(), name: z.string() }) }) },
        requestState: `what=${what}`,
      });
    }
    return { content: [{ type: 'text', text: `${what} confirmed by ${answer.name} on ${instance}` }] };
  });
  return server;
}

const modern = toNodeHandler(createMcpHandler(() => build(() => undefined), { legacy: 'reject' }),
  { onerror: (e) => console.error('handler error', e) });
const sessions = new Map();

async function legacy(req, res) {
  const sid = req.headers['mcp-session-id'];
  if (sid !== undefined) {
    const t = sessions.get(sid);
    if (!t) {
      res.writeHead(404, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32001, message: 'Session not found' }, id: null }));
      return;
    }
    return t.handleRequest(req, res);
  }
  let t;
  t = new NodeStreamableHTTPServerTransport({
    sessionIdGenerator: () => randomUUID(),
    onsessioninitialized: (id) => sessions.set(id, t),
  });
  t.onclose = () => { if (t.sessionId) sessions.delete(t.sessionId); };
  await build(() => t.sessionId).connect(t);
  return t.handleRequest(req, res);
}

const srv = http.createServer((req, res) => {
  res.setHeader('x-peer-instance', instance);
  if (req.method === 'POST' && req.headers['mcp-method'] !== undefined) {
    return modern(req, res);
  }
  legacy(req, res).catch((e) => { console.error('legacy error', e); if (!res.headersSent) { res.writeHead(500); res.end(); } });
});
srv.listen(Number(port), '127.0.0.1', () => console.log(`listening on http://127.0.0.1:${srv.address().port}/mcp`));
