// The official TypeScript SDK client (@modelcontextprotocol/client 2.4.x, modern era pinned to
// 2026-07-28) against mcp-edge with a static bearer token: list the tools, then run an MRTR
// tool call (create_repo asks for the GitHub login through elicitation; the SDK answers it and
// retries). Prints one JSON line: {"ok":true,"tools":[…],"text":"…"} or
// {"ok":false,"status":<last HTTP status>,"wwwAuthenticate":…,"name":<error class>,"error":…}. Usage: node client.mjs <url> <token|-> [tool]
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';

const [url, token, tool = 'create_repo'] = process.argv.slice(2);
const client = new Client(
  { name: 'mcp-edge-auth-test', version: '0' },
  { capabilities: { elicitation: {} }, versionNegotiation: { mode: { pin: '2026-07-28' } } },
);
client.setRequestHandler('elicitation/create', async () => ({
  action: 'accept',
  content: { name: 'octocat' },
}));
// The last HTTP answer, to report what the SDK reacted to.
let last = { status: null, wwwAuthenticate: null };
const recordingFetch = async (input, init) => {
  const res = await fetch(input, init);
  last = { status: res.status, wwwAuthenticate: res.headers.get('www-authenticate') };
  return res;
};
const transport = new StreamableHTTPClientTransport(new URL(url), {
  authProvider: { token: async () => (token === '-' ? undefined : token) },
  fetch: recordingFetch,
});
try {
  await client.connect(transport);
  const { tools } = await client.listTools();
  const result = await client.callTool({ name: tool, arguments: { repo: 'demo', text: 'hi' } });
  const text = result.content?.map((c) => c.text ?? '').join('') ?? '';
  console.log(JSON.stringify({ ok: !result.isError, tools: tools.map((t) => t.name), text }));
} catch (e) {
  console.log(JSON.stringify({
    ok: false,
    status: last.status,
    wwwAuthenticate: last.wwwAuthenticate,
    name: e?.constructor?.name,
    error: String(e?.message ?? e),
  }));
} finally {
  await client.close().catch(() => {});
}
