//! `mcp-edge backend`, the stateless MRTR server, on its own (no gateway in front): the spec's
//! conformance cases against a backend pool (`protocol`), the MRTR walkthroughs of its tools and
//! state shared only by pools or processes with one key (`mrtr`), the one-time-use store shared
//! through Redis (`store`), and the Tasks extension (`tasks`). Peers: redis-server for `store`
//! (skipped loudly without it; a failure under `MCP_EDGE_REQUIRE_PEERS=1`); `mrtr` and `store`
//! start `mcp-edge backend` children.

#[path = "../support/mod.rs"]
mod support;

mod capacity;
mod mrtr;
mod protocol;
mod store;
mod tasks;
