//! Federation: several different MCP servers behind one endpoint, on loopback.
//!
//! - `policies`: scripted servers whose lists and hints the test decides — the collision
//!   policies, merged pages and forged cursors, aggregated `ttlMs`/`cacheScope` (and a
//!   `ttlMs: 0` list asked again for every answer while a long-lived public one is asked once),
//!   a pool going down (stale catalog, then expired), `list_changed` making a new tool callable,
//!   virtual endpoints;
//! - `sdk`: a heterogeneous fleet — `mcp-edge backend`, a TypeScript SDK server and a Python
//!   SDK server, two instances each — driven by the official TypeScript and Python SDK clients
//!   (every tool across pages, one call and one MRTR flow per server) and by the load tester.

mod auth;
mod freshness;
mod init;
mod policies;
mod routing;
pub(crate) mod scripted;
mod sdk;

use crate::support;
use mcp_edge::gateway::RunningGateway;
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::time::Duration;

use crate::support::http::{request, Reply};

/// A gateway in front of `pools` (name → instances) with `federation:` `yaml` (indented under
/// `federation:`).
pub fn gateway(pools: &[(&str, &[SocketAddr])], federation: &str) -> RunningGateway {
    gateway_with(pools, federation, "")
}

/// [`gateway`] with more top-level YAML (`auth:` and so on).
pub fn gateway_with(
    pools: &[(&str, &[SocketAddr])],
    federation: &str,
    extra: &str,
) -> RunningGateway {
    let pools: Vec<(&str, &[SocketAddr], &str)> = pools
        .iter()
        .map(|(n, a)| (*n, *a, "balance: round_robin"))
        .collect();
    let cfg = support::config(&pools, &format!("federation:\n{federation}{extra}"));
    RunningGateway::start(cfg).unwrap()
}

/// The admin listener's `/catalog` report.
pub fn catalog(gw: &RunningGateway) -> Value {
    let admin = gw.admin_addr.expect("an admin listener");
    request(admin, "GET", "/catalog", &[], b"").json()
}

/// Wait until every federated pool's catalog is in `state`.
pub fn wait_state(gw: &RunningGateway, pools: &[&str], state: &str) {
    let ok = support::eventually(Duration::from_secs(20), || {
        let c = catalog(gw);
        pools.iter().all(|p| c["pools"][p]["state"] == state)
    });
    assert!(ok, "catalogs never became {state}: {}", catalog(gw));
}

/// A JSON-RPC request to `path` with the headers it needs (`Mcp-Name` for the named methods).
pub fn rpc_at(gw: &RunningGateway, path: &str, method: &str, mut params: Value) -> Reply {
    params["_meta"] = support::http::meta(json!({"elicitation": {}}));
    let name = match method {
        "tools/call" | "prompts/get" => params["name"].as_str().map(String::from),
        "resources/read" => params["uri"].as_str().map(String::from),
        _ => None,
    };
    let mut headers = support::http::good_headers(method, name.as_deref());
    headers.retain(|(k, _)| k != "Mcp-Name");
    if let Some(n) = name {
        headers.push((
            "Mcp-Name".into(),
            mcp_edge::mcp::header::encode_value(&n).into_owned(),
        ));
    }
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    request(
        gw.mcp_addr,
        "POST",
        path,
        &support::http::hdrs(&headers),
        body.to_string().as_bytes(),
    )
}

pub fn rpc(gw: &RunningGateway, method: &str, params: Value) -> Reply {
    rpc_at(gw, "/mcp", method, params)
}

/// The names of a merged list (one page).
pub fn names(reply: &Reply, member: &str, field: &str) -> Vec<String> {
    let r = reply.result();
    r[member]
        .as_array()
        .unwrap_or_else(|| panic!("no {member} in {r}"))
        .iter()
        .map(|t| t[field].as_str().unwrap().to_string())
        .collect()
}
