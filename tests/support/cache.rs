//! Helpers of the edge-cache tests: a gateway in front of given instances, metric scraping,
//! the cache header, and a scripted upstream serving cacheable reads and list pages.
#![allow(dead_code)]

use serde_json::{json, Value};
use std::net::SocketAddr;
use std::time::Duration;

pub use super::metrics::{sample, scrape};
use super::scripted::{cacheable, Script, Scripted};
use super::{config, Reply};
use crate::support::http::{request, rpc};
use mcp_edge::gateway::RunningGateway;

pub const NOW: Duration = Duration::ZERO;

pub fn gateway(addrs: &[SocketAddr], extra: &str) -> RunningGateway {
    let cfg = config(
        &[("default", addrs, "balance: round_robin")],
        &format!("default_route: {{pool: default}}\n{extra}"),
    );
    RunningGateway::start(cfg).unwrap()
}

/// The body with `"id"` and `"ttlMs"` values blanked, to compare a hit with the original.
pub fn without_id_and_ttl(r: &Reply) -> Value {
    let mut v = r.json();
    v["id"] = Value::Null;
    if v["result"].get("ttlMs").is_some() {
        v["result"]["ttlMs"] = Value::Null;
    }
    v
}

pub fn cache_header(r: &Reply) -> &str {
    r.header("x-mcp-edge-cache").unwrap_or("")
}

pub fn resource_upstream() -> Scripted {
    Scripted::start(|req| {
        let uri = req["params"]["uri"].as_str().unwrap_or("").to_string();
        let contents = json!({"contents": [{"uri": uri, "text": format!("body of {uri}")}]});
        match req["method"].as_str().unwrap_or("") {
            "resources/read" => match uri.as_str() {
                u if u.starts_with("private://") => {
                    Script::Result(cacheable(contents, json!(60000), "private"), NOW)
                }
                "ttl://zero" => Script::Result(cacheable(contents, json!(0), "public"), NOW),
                "ttl://negative" => Script::Result(cacheable(contents, json!(-5), "public"), NOW),
                "ttl://missing" => Script::Result(
                    json!({"resultType": "complete", "cacheScope": "public", "contents": []}),
                    NOW,
                ),
                "mrtr://ask" => Script::Result(
                    json!({"resultType": "input_required", "ttlMs": 60000, "cacheScope": "public",
                           "inputRequests": {"a": {"method": "elicitation/create", "params": {}}}}),
                    NOW,
                ),
                _ => Script::Result(cacheable(contents, json!(60000), "public"), NOW),
            },
            "subscriptions/listen" => Script::Listen,
            "tools/list" => {
                let page = req["params"]["cursor"]
                    .as_str()
                    .unwrap_or("first")
                    .to_string();
                if page == "stale" {
                    return Script::Error(-32602);
                }
                let next = if page == "first" {
                    json!("second")
                } else {
                    Value::Null
                };
                let mut r = cacheable(
                    json!({"tools": [{"name": format!("tool-{page}"), "inputSchema": {"type": "object"}}]}),
                    json!(60000),
                    "public",
                );
                if !next.is_null() {
                    r["nextCursor"] = next;
                }
                Script::Result(r, NOW)
            }
            _ => Script::Result(cacheable(json!({}), json!(60000), "public"), NOW),
        }
    })
}

pub fn read(gw: &RunningGateway, id: i64, uri: &str, extra: &[(&str, &str)]) -> Reply {
    rpc(
        gw.mcp_addr,
        json!(id),
        "resources/read",
        json!({"uri": uri}),
        extra,
    )
}

/// `promtool check metrics` on a scrape: `None` when promtool is not installed (said loudly;
/// a failure under MCP_EDGE_REQUIRE_PEERS=1), else what it printed (empty: no problem found).
pub fn promtool(text: &str) -> Option<String> {
    use std::io::Write;
    if !super::programs::have(super::programs::PROMTOOL) {
        return None;
    }
    let mut child = std::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("promtool is on PATH: it starts");
    let stdin = child.stdin.take();
    let _ = stdin.expect("piped").write_all(text.as_bytes());
    let out = child.wait_with_output().unwrap();
    Some(format!(
        "{}{}{}",
        if out.status.success() {
            ""
        } else {
            "promtool failed: "
        },
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    ))
}
