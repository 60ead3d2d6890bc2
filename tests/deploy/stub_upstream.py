#!/usr/bin/env python3
"""A tiny MCP upstream for tests/deploy/check.sh: answers every POST with a JSON-RPC result.

`tools/call` of a tool named `needs_input` answers `resultType: input_required` (so the gateway's
mrtr_input_required_total moves) until a retry carries a non-empty `inputResponses` (then the
gateway sees an MRTR flow complete); anything else is `complete`. Prints its port on stdout, and
exits on its own after --lifetime seconds in case nobody stops it.
"""
import argparse
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            req = json.loads(body)
        except ValueError:
            req = {}
        params = req.get("params") or {}
        if req.get("method") == "tools/call" and params.get("name") == "needs_input" and not params.get("inputResponses"):
            result = {"resultType": "input_required", "inputRequests": {}, "requestState": "opaque"}
        else:
            result = {"resultType": "complete", "content": [{"type": "text", "text": "ok"}]}
        out = json.dumps({"jsonrpc": "2.0", "id": req.get("id"), "result": result}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *args):
        pass


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--lifetime", type=float, default=300)
    a = ap.parse_args()
    srv = ThreadingHTTPServer(("127.0.0.1", a.port), Handler)
    print(srv.server_address[1], flush=True)
    threading.Timer(a.lifetime, srv.shutdown).start()
    srv.serve_forever()


if __name__ == "__main__":
    main()
