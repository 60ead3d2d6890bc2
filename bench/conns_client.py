#!/usr/bin/env python3
"""bench/conns_client.py: hold N loopback connections open against one HTTP/1.1 server.

Used by bench/conns.sh. Three modes:
  idle  each connection sends one MCP tools/call POST, reads the whole answer (Content-Length or
        chunked), then stays open and silent (an idle keep-alive client).
  sse   each connection sends one subscriptions/listen POST and reads until the first SSE event
        (the acknowledgement) has arrived; the stream then stays open (the server may send
        keep-alive comments, which are read and dropped).
  legacy  a 2025-era client's session through the protocol bridge: one initialize POST (its
        answer names the session), then on the same connection the standalone GET stream of that
        session, held open once its head (200, text/event-stream) has arrived.
Connections are opened at most --parallel at a time (default 200, or $CONNS_PARALLEL). When all are established (or failed), one
line "ready ok=N failed=M" is written to --ready FILE; then the client holds everything open
until SIGTERM/SIGINT or --hold seconds, whichever comes first, and exits. Loopback only: the
host must be 127.0.0.1 or ::1.
"""
import argparse
import asyncio
import json
import signal
import sys

META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {}}
TOOLS_CALL = json.dumps({
    "jsonrpc": "2.0", "id": 1, "method": "tools/call",
    "params": {"name": "echo", "arguments": {"text": "hello"}, "_meta": META},
}).encode()
LISTEN = json.dumps({
    "jsonrpc": "2.0", "id": 1, "method": "subscriptions/listen",
    "params": {"notifications": {"toolsListChanged": True}, "_meta": META},
}).encode()


INITIALIZE = json.dumps({
    "jsonrpc": "2.0", "id": 1, "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {},
               "clientInfo": {"name": "conns-client", "version": "1"}},
}).encode()


def legacy_init(host, port, path):
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\n"
        "Content-Type: application/json\r\n"
        "Accept: application/json, text/event-stream\r\n"
        f"Content-Length: {len(INITIALIZE)}\r\n\r\n"
    )
    return head.encode() + INITIALIZE


def legacy_stream(host, port, path, session):
    return (
        f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\n"
        "Accept: text/event-stream\r\n"
        "MCP-Protocol-Version: 2025-06-18\r\n"
        f"Mcp-Session-Id: {session}\r\n\r\n"
    ).encode()


async def open_legacy(reader, writer, host, port, path, timeout):
    """initialize, then the session's GET stream on the same connection."""
    writer.write(legacy_init(host, port, path))
    head = await asyncio.wait_for(read_answer(reader, False), timeout)
    sid = None
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"mcp-session-id:"):
            sid = line.split(b":", 1)[1].strip().decode()
    if not sid:
        raise RuntimeError(f"initialize answered without a session id: {head[:300]!r}")
    writer.write(legacy_stream(host, port, path, sid))
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout)
    if head.split(b" ", 2)[1] != b"200" or b"text/event-stream" not in head.lower():
        raise RuntimeError(f"the GET stream was not opened: {head[:300]!r}")


def request(host, port, path, method, name, body):
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\n"
        "Content-Type: application/json\r\n"
        "Accept: application/json, text/event-stream\r\n"
        "MCP-Protocol-Version: 2026-07-28\r\n"
        f"Mcp-Method: {method}\r\n"
        + (f"Mcp-Name: {name}\r\n" if name else "")
        + f"Content-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


async def read_answer(reader, sse):
    head = await reader.readuntil(b"\r\n\r\n")
    status = head.split(b" ", 2)[1]
    if status != b"200":
        raise RuntimeError(f"status {status.decode()}: {head[:200]!r}")
    lower = head.lower()
    if sse:
        if b"text/event-stream" not in lower:
            raise RuntimeError(f"not an SSE answer: {head[:300]!r}")
        # The first event ends with a blank line (chunk framing around it does not matter).
        buf = b""
        while b"data:" not in buf or b"\n\n" not in buf[buf.index(b"data:"):]:
            chunk = await reader.read(4096)
            if not chunk:
                raise RuntimeError("stream closed before the first event")
            buf += chunk
        return head
    for line in lower.split(b"\r\n"):
        if line.startswith(b"content-length:"):
            await reader.readexactly(int(line.split(b":", 1)[1]))
            return head
    if b"transfer-encoding: chunked" in lower:
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
            await reader.readexactly(size + 2)
            if size == 0:
                return head
    raise RuntimeError(f"answer without a length: {head[:300]!r}")


async def drain(reader):
    """Read and drop whatever the server sends (SSE keep-alive comments) until it closes."""
    try:
        while await reader.read(4096):
            pass
    except (ConnectionError, asyncio.CancelledError):
        pass


async def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--path", default="/mcp")
    ap.add_argument("--n", type=int, required=True)
    ap.add_argument("--mode", choices=["idle", "sse", "legacy"], required=True)
    ap.add_argument("--parallel", type=int, default=int(__import__("os").environ.get("CONNS_PARALLEL", "200")))
    ap.add_argument("--timeout", type=float, default=30.0, help="per connection setup")
    ap.add_argument("--hold", type=float, default=300.0, help="the longest hold, seconds")
    ap.add_argument("--ready", required=True, help="file written when all are set up")
    a = ap.parse_args()
    if a.host not in ("127.0.0.1", "::1", "localhost"):
        sys.exit("loopback only")
    if not 0 < a.n <= 100_000:
        sys.exit("--n must be in 1..100000")
    sse = a.mode == "sse"
    payload = request(a.host, a.port, a.path,
                      "subscriptions/listen" if sse else "tools/call",
                      None if sse else "echo", LISTEN if sse else TOOLS_CALL)
    held, errors, tasks = [], [], []
    gate = asyncio.Semaphore(a.parallel)

    async def one():
        async with gate:
            try:
                r, w = await asyncio.wait_for(asyncio.open_connection(a.host, a.port), a.timeout)
                if a.mode == "legacy":
                    await open_legacy(r, w, a.host, a.port, a.path, a.timeout)
                else:
                    w.write(payload)
                    await asyncio.wait_for(read_answer(r, sse), a.timeout)
                held.append(w)
                if sse or a.mode == "legacy":
                    tasks.append(asyncio.create_task(drain(r)))
            except Exception as e:  # counted and reported, one line per kind
                errors.append(f"{type(e).__name__}: {e}")

    await asyncio.gather(*(one() for _ in range(a.n)))
    with open(a.ready, "w") as f:
        f.write(f"ready ok={len(held)} failed={len(errors)}\n")
    for kind in sorted(set(errors))[:5]:
        print(f"conns_client: {errors.count(kind)} x {kind}", file=sys.stderr)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for s in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(s, stop.set)
    try:
        await asyncio.wait_for(stop.wait(), a.hold)
    except asyncio.TimeoutError:
        pass
    for t in tasks:
        t.cancel()
    for w in held:
        w.transport.abort()


if __name__ == "__main__":
    asyncio.run(main())
