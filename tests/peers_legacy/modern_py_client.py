"""A 2026-07-28 client written with the official Python SDK 2.x (mcp 2.3.0, mode pinned to
2026-07-28), for the tests of a pool of 2025-era servers behind mcp-edge: it lists the tools and
calls each one named in argv[2] (";"-separated, name or name=JSON-arguments); its callbacks answer
the input requests of every input_required (elicitation, sampling, roots), and the SDK retries
with the requestState.

Usage: python modern_py_client.py URL CALLS
Prints one JSON line: {ok, tools, results: {name: {isError, text}}, asked} (ok false with the
error when anything raised).
"""

import asyncio
import json
import sys

import mcp_types as types
from mcp import Client

url = sys.argv[1]
calls = [c for c in (sys.argv[2] if len(sys.argv) > 2 else "").split(";") if c]
asked = []


async def on_elicit(_ctx, params):
    asked.append("elicitation/create")
    schema = getattr(params, "requested_schema", None) or getattr(params, "requestedSchema", None) or {}
    if hasattr(schema, "model_dump"):
        schema = schema.model_dump()
    content = {}
    for key, prop in (schema.get("properties") or {}).items():
        kind = prop.get("type") if isinstance(prop, dict) else None
        content[key] = True if kind == "boolean" else 1 if kind in ("number", "integer") else "Ada"
    return types.ElicitResult(action="accept", content=content)


async def on_sample(_ctx, _params):
    asked.append("sampling/createMessage")
    return types.CreateMessageResult(role="assistant", content=types.TextContent(type="text", text="Paris"),
                                     model="test-model", stop_reason="endTurn")


async def on_roots(_ctx):
    asked.append("roots/list")
    return types.ListRootsResult(roots=[types.Root(uri="file:///work", name="work")])


async def main():
    out = {"ok": True}
    try:
        async with Client(url, mode="2026-07-28", elicitation_callback=on_elicit,
                          sampling_callback=on_sample, list_roots_callback=on_roots, cache=None) as client:
            tools = await client.list_tools()
            out["tools"] = [t.name for t in tools.tools]
            out["results"] = {}
            for c in calls:
                name, _, raw = c.partition("=")
                r = await client.call_tool(name, json.loads(raw) if raw else {})
                text = " ".join(getattr(x, "text", "") for x in (r.content or []))
                out["results"][name] = {"isError": bool(r.is_error), "text": text}
    except Exception as e:  # reported in the JSON line, for the test to show
        out["ok"] = False
        out["error"] = f"{type(e).__name__}: {e}"
    out["asked"] = asked
    print(json.dumps(out))


asyncio.run(main())
