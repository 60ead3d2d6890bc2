"""A small MCP server written with the official Python SDK (mcp 2.3.0, 2026-07-28, stateless),
used by tests/loadtest/sdk_fleets.rs as a fleet that is not mcp-edge's reference backend.

Usage: python py_server.py PORT SHARED_KEY
Tools: greet (plain, bounded integer), order (MRTR: a Resolve(...) dependency elicits a
confirmation; requestState sealed with the shared AES-GCM key, so any instance with the same key
and server name finishes a retry), drop_table (destructiveHint, left out by --scenario auto).
"""

import sys
from typing import Annotated

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.resolve import Elicit, Resolve
from mcp.server.request_state import RequestStateSecurity
from mcp_types import ToolAnnotations
from pydantic import BaseModel, Field

port, key = int(sys.argv[1]), sys.argv[2]

server = MCPServer(
    name="py-peer",
    version="1.0.0",
    request_state_security=RequestStateSecurity(keys=[key], bind_principal=None),
)


class Confirm(BaseModel):
    confirm: bool
    note: str = Field(min_length=1)


def ask_confirmation(item: str) -> Elicit[Confirm]:
    return Elicit(f"Order {item}?", Confirm)


@server.tool()
def greet(name: str, times: Annotated[int, Field(ge=1, le=3)]) -> str:
    """Greet someone a few times."""
    return " ".join([f"hello {name}"] * times)


@server.tool()
def order(item: str, answer: Annotated[Confirm, Resolve(ask_confirmation)]) -> str:
    """Order an item after a confirmation (MRTR)."""
    if not answer.confirm:
        raise ValueError(f"order of {item} not confirmed")
    return f"ordered {item} ({answer.note})"


@server.tool(annotations=ToolAnnotations(destructive_hint=True))
def drop_table() -> str:
    """Drop everything."""
    return "dropped"


if __name__ == "__main__":
    print(f"listening on http://127.0.0.1:{port}/mcp", flush=True)
    if sys.argv[3:] == ["sessions"]:
        # Both eras: 2026-07-28 per request, and 2025-era clients in sessions of their own
        # (asked mid-call with elicitation/create): the pass-through tests' pool.
        server.run("streamable-http", host="127.0.0.1", port=port, stateless_http=False)
    else:
        server.run("streamable-http", host="127.0.0.1", port=port, stateless_http=True, json_response=True)
