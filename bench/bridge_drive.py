"""bench/bridge_drive.py: the requests bench/bridge-callgrind.sh counts, on one kept connection.

    python3 bench/bridge_drive.py PORT native|legacy|plain N

native  a 2026 `tools/call echo` whose `_meta` carries what a bridged leg carries (the protocol
        version, the client capabilities and the `clientInfo`: a 2026 client SHOULD send it)
plain   the same 2026 call with no `clientInfo` in its `_meta`
legacy  `initialize` (2025-11-25, clientInfo {"name":"bench","version":"1"}), then N 2025-era
        `tools/call echo` on that session

Every answer must be a 200; the first other one stops the run with its status and body.
"""
import http.client
import json
import sys

port, kind, n = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
base = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
CALL = {"name": "echo", "arguments": {"text": "hi"}}
META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}


def post(body, headers):
    c.request("POST", "/mcp", body, headers)
    r = c.getresponse()
    d = r.read()
    if r.status != 200:
        sys.exit(f"{kind}: {r.status} {d[:200]!r}")
    return r


if kind == "legacy":
    init = {"protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "bench", "version": "1"}}
    r = post(json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init}), base)
    h = {**base, "MCP-Protocol-Version": "2025-11-25", "Mcp-Session-Id": r.getheader("mcp-session-id")}
    params = CALL
else:
    h = {**base, "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "echo"}
    meta = dict(META)
    if kind == "native":
        meta["io.modelcontextprotocol/clientInfo"] = {"name": "bench", "version": "1"}
    params = {**CALL, "_meta": meta}
body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params},
                  separators=(",", ":"))
for _ in range(n):
    post(body, h)
