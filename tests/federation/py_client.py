"""The official Python SDK client (mcp 2.3.0, pinned to 2026-07-28) against a federated
endpoint: lists every tool (following next_cursor across pages), calls one plain tool of each
server and completes one MRTR call of each server (the SDK answers the elicitation and retries
with the requestState).

Usage: python py_client.py URL
Prints one JSON line: {tools, pages, results: {name: text}, elicitations}. Exits 1 on error.
"""

import asyncio
import json
import sys

import mcp_types as types
from mcp import Client

url = sys.argv[1]
elicitations = 0


async def on_elicit(_ctx, params):
    global elicitations
    elicitations += 1
    msg = getattr(params, "message", "") or ""
    if msg.startswith("Book"):
        content = {"confirm": True, "guest": "grace"}
    elif msg.startswith("Order"):
        content = {"confirm": True, "note": "by py"}
    else:
        content = {"name": "octocat"}
    return types.ElicitResult(action="accept", content=content)


CALLS = [
    ("reference__echo", {"text": "hi"}),
    ("ts__add", {"a": 4, "b": 5}),
    ("py__greet", {"name": "py", "times": 1}),
    ("reference__create_repo", {"repo": "demo"}),
    ("ts__book", {"room": "k3"}),
    ("py__order", {"item": "coffee"}),
]


async def main():
    async with Client(url, mode="2026-07-28", elicitation_callback=on_elicit, cache=None) as client:
        tools, pages, cursor = [], 0, None
        while True:
            page = await client.list_tools(cursor=cursor)
            pages += 1
            tools += [t.name for t in page.tools]
            cursor = page.next_cursor
            if not cursor or pages >= 50:
                break
        results = {}
        for name, args in CALLS:
            r = await client.call_tool(name, args)
            text = r.content[0].text if r.content else json.dumps(r.model_dump())
            results[name] = ("ERROR " if r.is_error else "") + text
        print(json.dumps({"tools": tools, "pages": pages, "results": results, "elicitations": elicitations}))


asyncio.run(main())
