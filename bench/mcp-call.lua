-- wrk script for bench/compare.sh: one ~480 B MCP 2026-07-28 tools/call POST (request line,
-- headers and body together), with the Mcp-* headers a gateway routes and checks on.
-- No per-response Lua callback: it would make wrk itself the bottleneck. Non-2xx answers are
-- counted by wrk ("Non-2xx or 3xx responses") and compare.sh checks each target's answer once
-- with curl before measuring.
wrk.method = "POST"
wrk.path = "/mcp"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Accept"] = "application/json, text/event-stream"
wrk.headers["MCP-Protocol-Version"] = "2026-07-28"
wrk.headers["Mcp-Method"] = "tools/call"
wrk.headers["Mcp-Name"] = "echo"
wrk.body = '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello from the mcp-edge peer benchmark, 480 B"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}'
