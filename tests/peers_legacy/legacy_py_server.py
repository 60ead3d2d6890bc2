"""A 2025-era MCP server written with the official Python SDK 1.x (`mcp` 1.30, FastMCP over
Streamable HTTP with sessions), for the tests of a legacy pool behind mcp-edge. Its tools ask
mid-call: confirm_deploy (elicitation), ask_model (sampling), client_roots (roots); add needs
nothing.

Usage: legacy_py_server.py PORT"""
import sys

from mcp.server.fastmcp import Context, FastMCP
from mcp.types import SamplingMessage, TextContent
from pydantic import BaseModel

port = int(sys.argv[1])
name = f"py-v1-{port}"
mcp = FastMCP("legacy-py-server", host="127.0.0.1", port=port, instructions="A 2025-era Python server.")


class Confirm(BaseModel):
    confirm: bool


@mcp.tool()
def add(a: int, b: int) -> str:
    """Adds two numbers."""
    return f"{a + b} (from {name})"


@mcp.tool()
async def confirm_deploy(service: str, environment: str, ctx: Context) -> str:
    """Deploys after asking the user to confirm."""
    r = await ctx.elicit(message=f"Deploy {service} to {environment}?", schema=Confirm)
    if r.action != "accept" or not r.data.confirm:
        return f"deploy of {service} cancelled"
    return f"deployed {service} to {environment} (asked by {name})"


@mcp.tool()
async def ask_model(question: str, ctx: Context) -> str:
    """Asks the client's model a question."""
    r = await ctx.session.create_message(
        messages=[SamplingMessage(role="user", content=TextContent(type="text", text=question))], max_tokens=50
    )
    return f"the model said: {r.content.text}"


@mcp.tool()
async def client_roots(ctx: Context) -> str:
    """Lists the client's roots."""
    r = await ctx.session.list_roots()
    return "roots: " + ", ".join(str(x.uri) for x in r.roots)


if __name__ == "__main__":
    mcp.run(transport="streamable-http")
