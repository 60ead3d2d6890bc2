// The official TypeScript SDK client (v2, pinned to 2026-07-28) against a federated endpoint:
// lists every tool (following nextCursor across pages), calls one plain tool of each server and
// completes one MRTR call of each server (the SDK answers the elicitation and retries with the
// requestState). Usage: node ts_client.mjs URL
// Prints one JSON line: { tools, pages, results: {name: text}, elicitations }. Exits 1 on error.
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';

const url = new URL(process.argv[2]);
let elicitations = 0;
const client = new Client(
  { name: 'mcp-edge-federation-test', version: '1.0.0' },
  { capabilities: { elicitation: {} }, versionNegotiation: { mode: { pin: '2026-07-28' } } },
);
client.setRequestHandler('elicitation/create', async (req) => {
  elicitations += 1;
  const msg = req.params?.message ?? '';
  if (msg.startsWith('Book')) return { action: 'accept', content: { confirm: true, guest: 'ada' } };
  if (msg.startsWith('Order')) return { action: 'accept', content: { confirm: true, note: 'by ts' } };
  return { action: 'accept', content: { name: 'octocat' } };
});
const calls = [
  ['reference__echo', { text: 'hi' }],
  ['ts__add', { a: 2, b: 3 }],
  ['py__greet', { name: 'ts', times: 2 }],
  ['reference__create_repo', { repo: 'demo' }],
  ['ts__book', { room: 'k2' }],
  ['py__order', { item: 'tea' }],
];
try {
  await client.connect(new StreamableHTTPClientTransport(url));
  const tools = [];
  let cursor;
  let pages = 0;
  do {
    const page = await client.listTools(cursor ? { cursor } : undefined);
    pages += 1;
    tools.push(...page.tools.map((t) => t.name));
    cursor = page.nextCursor;
  } while (cursor && pages < 50);
  const results = {};
  for (const [name, args] of calls) {
    const r = await client.callTool({ name, arguments: args });
    results[name] = (r.isError ? 'ERROR ' : '') + (r.content?.[0]?.text ?? JSON.stringify(r));
  }
  console.log(JSON.stringify({ tools, pages, results, elicitations }));
  await client.close();
} catch (e) {
  console.error(e?.stack ?? String(e));
  process.exit(1);
}
