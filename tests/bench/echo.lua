-- wrk script: POST one `echo` tools/call with the 2026-07-28 headers.
-- Usage: wrk -t1 -c32 -d5s -s tests/bench/echo.lua http://127.0.0.1:PORT/mcp
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Accept"] = "application/json, text/event-stream"
wrk.headers["MCP-Protocol-Version"] = "2026-07-28"
wrk.headers["Mcp-Method"] = "tools/call"
wrk.headers["Mcp-Name"] = "echo"
wrk.body = '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}'

local errors = 0
response = function(status, headers, body)
  if status ~= 200 or not string.find(body, '"resultType":"complete"', 1, true) then errors = errors + 1 end
end
done = function(summary, latency, requests)
  io.write(string.format("non-200 or incomplete responses: %d\n", errors))
end
