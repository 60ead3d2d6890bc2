//! Scripted MCP servers for the federation tests: each answers `server/discover`, `tools/list`
//! (its current tools, with the `ttlMs`/`cacheScope` the test chose) and `tools/call` (naming
//! itself and the tool it was asked for), and records every request it receives.

use serde_json::{json, Value};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::rpc_at;
use crate::support::scripted::{cacheable, Script, Scripted};

/// One scripted MCP server: `label` names it in call results.
pub struct Server {
    pub s: Scripted,
    pub tools: Arc<Mutex<Vec<String>>>,
}

pub fn server(label: &'static str, tools: &[&str], ttl: u64, scope: &'static str) -> Server {
    let list = Arc::new(Mutex::new(
        tools.iter().map(|t| t.to_string()).collect::<Vec<_>>(),
    ));
    let l = list.clone();
    let s = Scripted::start(move |req: &Value| {
        let result = match req["method"].as_str().unwrap_or("") {
            "server/discover" => cacheable(
                json!({"supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}}}),
                json!(ttl),
                scope,
            ),
            "tools/list" => {
                let tools: Vec<Value> = l
                    .lock()
                    .unwrap()
                    .iter()
                    .map(|n| json!({"name": n, "inputSchema": {"type": "object"}}))
                    .collect();
                cacheable(json!({ "tools": tools }), json!(ttl), scope)
            }
            "tools/call" => {
                let text = format!("{label}:{}", req["params"]["name"].as_str().unwrap_or("?"));
                json!({"resultType": "complete", "content": [{"type": "text", "text": text}]})
            }
            "subscriptions/listen" => return Script::Listen,
            _ => return Script::Error(-32601),
        };
        Script::Result(result, Duration::ZERO)
    });
    Server { s, tools: list }
}

pub fn call_text(
    gw: &mcp_edge::gateway::RunningGateway,
    path: &str,
    tool: &str,
) -> Result<String, i64> {
    let r = rpc_at(
        gw,
        path,
        "tools/call",
        json!({"name": tool, "arguments": {}}),
    );
    let v = r.json();
    match v.get("result") {
        Some(res) => Ok(res["content"][0]["text"].as_str().unwrap().to_string()),
        None => Err(v["error"]["code"].as_i64().unwrap_or(0)),
    }
}

pub fn two_servers() -> (Server, Server) {
    (
        server("a", &["greet", "pay"], 60_000, "public"),
        server("b", &["greet", "ship"], 60_000, "public"),
    )
}

/// A `server/discover` result with these capabilities, fresh for a minute, public.
pub fn discover(capabilities: Value) -> Value {
    cacheable(
        json!({"supportedVersions": ["2026-07-28"], "capabilities": capabilities}),
        json!(60_000),
        "public",
    )
}

/// A gateway federating two scripted servers as pools `a` and `b` under `federation` YAML.
pub fn pair(a: &Server, b: &Server, federation: &str) -> mcp_edge::gateway::RunningGateway {
    super::gateway(&[("a", &[a.s.addr]), ("b", &[b.s.addr])], federation)
}
