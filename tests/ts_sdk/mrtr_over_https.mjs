// The official TypeScript SDK client (v2, modern era pinned to 2026-07-28) over HTTPS through the
// gateway: tools/list, then create_repo, whose input_required answer (elicitation of the GitHub
// login) the SDK fulfils through the registered handler and retries with the requestState.
// Usage: NODE_EXTRA_CA_CERTS=ca.pem node mrtr_over_https.mjs https://localhost:PORT/mcp
// Prints one JSON line: { tools, text, elicitations }. Exits 1 on any error.
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';

const url = new URL(process.argv[2]);
let elicitations = 0;
const client = new Client(
  { name: 'mcp-edge-tls-test', version: '1.0.0' },
  {
    capabilities: { elicitation: {} },
    versionNegotiation: { mode: { pin: '2026-07-28' } },
  },
);
client.setRequestHandler('elicitation/create', async () => {
  elicitations += 1;
  return { action: 'accept', content: { name: 'octocat' } };
});
const transport = new StreamableHTTPClientTransport(url, {
  requestInit: { headers: { Authorization: 'Bearer alice' } },
});
try {
  await client.connect(transport);
  const { tools } = await client.listTools();
  const result = await client.callTool({ name: 'create_repo', arguments: { repo: 'demo' } });
  const text = result.content?.[0]?.text ?? JSON.stringify(result);
  console.log(JSON.stringify({ tools: tools.map((t) => t.name), text, elicitations }));
  await client.close();
} catch (e) {
  console.error(e?.stack ?? String(e));
  process.exit(1);
}
