// A small MCP server written with the official TypeScript SDK v2 (stateless, 2026-07-28), used
// by tests/loadtest/sdk_fleets.rs as a fleet that is not mcp-edge's reference backend.
// Usage: node ts_server.mjs PORT INSTANCE_NAME SHARED_KEY
// Tools: add (plain, outputSchema), forecast (x-mcp-header Region), book (MRTR: one
// elicitation, requestState sealed with the shared HMAC key so any instance finishes a retry),
// wipe (destructiveHint, must be left out by --scenario auto).
import http from 'node:http';
import { McpServer, createMcpHandler, createRequestStateCodec, inputRequired, acceptedContent, inputResponse, fromJsonSchema } from '@modelcontextprotocol/server';
import { toNodeHandler } from '@modelcontextprotocol/node';
import { z } from 'zod';

const [port, instance, key] = process.argv.slice(2);
const codec = createRequestStateCodec({ key, ttlSeconds: 600 });

function build() {
  const server = new McpServer({ name: 'ts-peer', version: '1.0.0' }, { requestState: { verify: codec.verify } });
  server.registerTool('add', {
    description: 'Add two integers',
    inputSchema: z.object({ a: z.number().int().min(1).max(100), b: z.number().int().min(1).max(100) }),
    outputSchema: z.object({ sum: z.number().int() }),
  }, async ({ a, b }) => ({
    content: [{ type: 'text', text: `sum ${a + b}` }],
    structuredContent: { sum: a + b },
  }));
  server.registerTool('forecast', {
    description: 'Weather for a region',
    inputSchema: fromJsonSchema({ type: 'object', required: ['region', 'days'], properties: {
      region: { type: 'string', enum: ['eu', 'us'], 'x-mcp-header': 'Region' },
      days: { type: 'integer', minimum: 1, maximum: 7 },
    } }),
  }, async (args) => ({ content: [{ type: 'text', text: `forecast ${args.region} ${args.days}d` }] }));
  server.registerTool('book', {
    description: 'Book a room after a confirmation (MRTR)',
    inputSchema: z.object({ room: z.string().min(2) }),
  }, async ({ room }, ctx) => {
    const view = inputResponse(ctx.mcpReq.inputResponses, 'confirm');
    if (view.kind === 'elicit' && view.action !== 'accept') {
      return { isError: true, content: [{ type: 'text', text: `booking of ${room} ${view.action}d by the user` }] };
    }
    const answer = acceptedContent(ctx.mcpReq.inputResponses, 'confirm', z.object({ confirm: z.boolean(), guest: z.string() }));
    if (answer === undefined) {
      const requestState = await codec.mint({ room, asked_by: instance });
      return inputRequired({
        inputRequests: { confirm: inputRequired.elicit({ message: `Book ${room}?`,
          requestedSchema: z.object({ confirm: z.boolean(), guest: z.string() }) }) },
        requestState,
      });
    }
    const st = await ctx.mcpReq.requestState();
    if (!st || st.room !== room) {
      return { isError: true, content: [{ type: 'text', text: 'requestState does not match the room' }] };
    }
    if (answer.confirm !== true) {
      return { isError: true, content: [{ type: 'text', text: `booking of ${room} not confirmed` }] };
    }
    return { content: [{ type: 'text', text: `booked ${room} for ${answer.guest} (asked by ${st.asked_by}, finished by ${instance})` }] };
  });
  server.registerTool('wipe', {
    description: 'Delete everything',
    inputSchema: z.object({}),
    annotations: { destructiveHint: true },
  }, async () => ({ content: [{ type: 'text', text: 'wiped' }] }));
  return server;
}

const handler = toNodeHandler(createMcpHandler(() => build()), { onerror: (e) => console.error('handler error', e) });
const srv = http.createServer((req, res) => {
  res.setHeader('x-peer-instance', instance);
  handler(req, res);
});
srv.listen(Number(port), '127.0.0.1', () => console.log(`listening on http://127.0.0.1:${srv.address().port}/mcp`));
