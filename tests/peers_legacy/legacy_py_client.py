"""A 2025-era client written with the official Python SDK 1.x (`mcp` 1.30: protocol 2025-11-25,
sessions, server-initiated elicitation/sampling/roots), for the protocol bridge's tests.

Usage: legacy_py_client.py URL TOOL[;TOOL...]  (a TOOL may be name=JSON-arguments)
Connects, lists the tools, calls each tool answering every mid-call question, and prints one
JSON line: what it saw.
MCP_EDGE_SUBSCRIBE (optional): a resource URI to subscribe to once the standalone stream is open
(a tool change announced then reached it), before the calls; the URIs of the
notifications/resources/updated that arrive (waiting at most 10 s for one of that URI after the
calls) are printed as `updated`."""
import asyncio
import json
import os
import sys

from mcp import ClientSession, types
from mcp.client.streamable_http import streamablehttp_client

asked = []
updated = []
tool_changes = []
heard = asyncio.Event()


async def on_message(message):
    """Notifications on the standalone stream: each sets `heard` for whoever waits."""
    if isinstance(message, types.ServerNotification):
        n = message.root
        if isinstance(n, types.ResourceUpdatedNotification):
            updated.append(str(n.params.uri))
        elif isinstance(n, types.ToolListChangedNotification):
            tool_changes.append(1)
        heard.set()


async def next_notification(seconds):
    try:
        await asyncio.wait_for(heard.wait(), seconds)
    except asyncio.TimeoutError:
        pass
    heard.clear()


async def stream_open(s):
    """The standalone stream opens in the background after initialize: it is open once a tool
    change announced now reaches it (at most 20 tries of 500 ms)."""
    for _ in range(20):
        if tool_changes:
            break
        heard.clear()
        await s.call_tool("test_trigger_tool_change", {})
        await next_notification(0.5)
    return bool(tool_changes)


async def await_update(uri):
    loop = asyncio.get_running_loop()
    until = loop.time() + 10
    while uri not in updated and loop.time() < until:
        await next_notification(until - loop.time())


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
    subscribe_to = os.environ.get("MCP_EDGE_SUBSCRIBE")
    try:
        async with streamablehttp_client(url) as (read, write, get_session_id):
            async with ClientSession(
                read, write, elicitation_callback=on_elicit, sampling_callback=on_sample, list_roots_callback=on_roots,
                message_handler=on_message,
            ) as s:
                init = await s.initialize()
                out["protocolVersion"] = init.protocolVersion
                out["server"] = init.serverInfo.name
                out["sessionId"] = "present" if get_session_id() else "absent"
                tools = await s.list_tools()
                out["tools"] = [t.name for t in tools.tools]
                if subscribe_to:
                    out["streamOpen"] = await stream_open(s)
                    await s.subscribe_resource(subscribe_to)
                out["results"] = {}
                for c in calls:
                    name, _, args = c.partition("=")
                    r = await s.call_tool(name, json.loads(args) if args else {})
                    text = " ".join(getattr(x, "text", "") for x in r.content)
                    out["results"][name] = {"isError": bool(r.isError), "text": text}
                if subscribe_to:
                    await await_update(subscribe_to)
                    await s.unsubscribe_resource(subscribe_to)
                await s.send_ping()
    except BaseException as e:  # noqa: BLE001 - report whatever broke, as data
        out["ok"] = False
        out["error"] = repr(e)
    out["asked"] = asked
    out["updated"] = updated
    print(json.dumps(out))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], [c for c in (sys.argv[2] if len(sys.argv) > 2 else "").split(";") if c]))
