"""A 2025-era client written with the official Python SDK 1.x (`mcp` 1.30: protocol 2025-11-25,
sessions, server-initiated elicitation/sampling/roots), for the protocol bridge's tests.

Usage: legacy_py_client.py URL TOOL[;TOOL...]  (a TOOL may be name=JSON-arguments)
Connects, lists the tools, calls each tool answering every mid-call question, and prints one
JSON line: what it saw."""
import asyncio
import json
import sys

from mcp import ClientSession, types
from mcp.client.streamable_http import streamablehttp_client

asked = []


async def on_elicit(ctx, params):
    asked.append("elicitation/create")
    props = (params.requestedSchema or {}).get("properties", {})
    content = {}
    for k, p in props.items():
        t = p.get("type")
        content[k] = True if t == "boolean" else 1 if t in ("number", "integer") else (p.get("enum") or ["Ada"])[0]
    return types.ElicitResult(action="accept", content=content)


async def on_sample(ctx, params):
    asked.append("sampling/createMessage")
    return types.CreateMessageResult(
        role="assistant", content=types.TextContent(type="text", text="Paris"), model="test-model", stopReason="endTurn"
    )


async def on_roots(ctx):
    asked.append("roots/list")
    return types.ListRootsResult(roots=[types.Root(uri="file:///work", name="work")])


async def main(url, calls):
    out = {"ok": True}
    try:
        async with streamablehttp_client(url) as (read, write, get_session_id):
            async with ClientSession(
                read, write, elicitation_callback=on_elicit, sampling_callback=on_sample, list_roots_callback=on_roots
            ) as s:
                init = await s.initialize()
                out["protocolVersion"] = init.protocolVersion
                out["server"] = init.serverInfo.name
                out["sessionId"] = "present" if get_session_id() else "absent"
                tools = await s.list_tools()
                out["tools"] = [t.name for t in tools.tools]
                out["results"] = {}
                for c in calls:
                    name, _, args = c.partition("=")
                    r = await s.call_tool(name, json.loads(args) if args else {})
                    text = " ".join(getattr(x, "text", "") for x in r.content)
                    out["results"][name] = {"isError": bool(r.isError), "text": text}
                await s.send_ping()
    except BaseException as e:  # noqa: BLE001 - report whatever broke, as data
        out["ok"] = False
        out["error"] = repr(e)
    out["asked"] = asked
    print(json.dumps(out))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], [c for c in (sys.argv[2] if len(sys.argv) > 2 else "").split(";") if c]))
