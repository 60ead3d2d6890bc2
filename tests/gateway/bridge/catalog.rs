//! A 2025-era server's list changes reach the federation catalog: the gateway's session with the
//! server holds its standalone stream, and a `notifications/tools/list_changed` there makes the
//! pool's catalog due at once, so a tool the server adds is routable and listed within moments,
//! not at the next refresh (set to a minute here, so the test fails without the stream); and a
//! 2026 client listening on the pool hears of it (`subscriptions/listen` through the session),
//! directly and on a federated endpoint's merged stream. And a legacy pool over TLS (the
//! server on HTTPS, the pool's `tls.ca_file`): calls and mid-call questions.

use serde_json::{json, Value};
use std::time::Duration;

use super::servers::legacy_gateway;
use super::{LegacyServer, ServerKind};
use crate::support::config;
use mcp_edge::gateway::RunningGateway;

/// A 2026 client's `subscriptions/listen` for tool list changes at `path` (with
/// `authorization`), under subscription id `id`: the stream, open, and its acknowledgement.
pub(super) fn listen_for_tools(
    gw: std::net::SocketAddr,
    path: &str,
    authorization: Option<&str>,
    id: i64,
) -> (crate::support::http::SseStream, Value) {
    use crate::support::http::{good_headers, meta, SseStream};
    let mut headers = good_headers("subscriptions/listen", None);
    if let Some(a) = authorization {
        headers.push(("Authorization".into(), a.into()));
    }
    let headers: Vec<(&str, &str)> = headers
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let listen = json!({"jsonrpc": "2.0", "id": id, "method": "subscriptions/listen", "params": {
        "notifications": {"toolsListChanged": true}, "_meta": meta(json!({}))}});
    let mut stream = SseStream::open_at(gw, path, &headers, &listen.to_string());
    assert_eq!(stream.status, 200);
    let ack = stream.next_message().expect("the acknowledgement");
    assert_eq!(
        ack["method"], "notifications/subscriptions/acknowledged",
        "{ack}"
    );
    (stream, ack)
}

/// The tool names of `/fed`'s merged `tools/list`.
fn listed(gw: &RunningGateway) -> Vec<String> {
    let r: Value = super::super::federation::rpc_at(gw, "/fed", "tools/list", json!({})).json();
    r["result"]["tools"]
        .as_array()
        .map(|ts| {
            ts.iter()
                .filter_map(|t| t["name"].as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn a_list_change_on_the_servers_standalone_stream_refreshes_the_catalog_at_once() {
    if !ServerKind::TypeScriptV1.installed() {
        return;
    }
    let ts = LegacyServer::start(ServerKind::TypeScriptV1, 0);
    let gw = legacy_gateway(std::slice::from_ref(&ts), "federation:\n  catalog: {refresh_floor: 60s, refresh_ceiling: 10m}\n  endpoints:\n    - { path: /fed, pools: [ts], collisions: prefix }\n");
    super::super::federation::wait_state(&gw, &["ts"], "fresh");
    assert!(listed(&gw).contains(&"ts__grow".to_string()));
    assert!(!listed(&gw).contains(&"ts__grown_1".to_string()));
    let r = super::super::federation::rpc_at(
        &gw,
        "/fed",
        "tools/call",
        json!({"name": "ts__grow", "arguments": {}}),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    // Routing reads the catalog (a `ttlMs: 0` list is read from the pool each time, so the
    // list alone would not show it): the new tool is called once the catalog has it.
    let call = || {
        let r = super::super::federation::rpc_at(
            &gw,
            "/fed",
            "tools/call",
            json!({"name": "ts__grown_1", "arguments": {}}),
        );
        r.json()["result"]["content"][0]["text"] == "grown_1"
    };
    let routed = crate::support::eventually(Duration::from_secs(10), call);
    assert!(routed, "the new tool never reached the catalog");
    assert!(listed(&gw).contains(&"ts__grown_1".to_string()));
}

#[test]
fn a_2026_clients_listen_stream_carries_a_2025_era_servers_list_changes() {
    if !ServerKind::TypeScriptV1.installed() {
        return;
    }
    let ts = LegacyServer::start(ServerKind::TypeScriptV1, 0);
    let gw = legacy_gateway(std::slice::from_ref(&ts), "");
    let (mut stream, ack) = listen_for_tools(gw.mcp_addr, "/mcp", None, 41);
    assert_eq!(
        ack["params"]["notifications"],
        json!({"toolsListChanged": true})
    );
    // The server adds a tool (on the same caller's session): the listener hears of it.
    let r = crate::support::http::call(
        gw.mcp_addr,
        2,
        "grow",
        json!({}),
        json!({}),
        None,
        json!({}),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let n = stream.next_message().expect("a list change");
    assert_eq!(n["method"], "notifications/tools/list_changed", "{n}");
    assert_eq!(
        n["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"], 41,
        "{n}"
    );
}

#[test]
fn a_federated_listen_stream_merges_a_2025_era_pools_list_changes() {
    if !ServerKind::TypeScriptV1.installed() {
        return;
    }
    let ts = LegacyServer::start(ServerKind::TypeScriptV1, 0);
    let gw = legacy_gateway(
        std::slice::from_ref(&ts),
        "federation:\n  endpoints:\n    - { path: /fed, pools: [ts], collisions: prefix }\n",
    );
    super::super::federation::wait_state(&gw, &["ts"], "fresh");
    let (mut stream, _) = listen_for_tools(gw.mcp_addr, "/fed", None, 43);
    let r = super::super::federation::rpc_at(
        &gw,
        "/fed",
        "tools/call",
        json!({"name": "ts__grow", "arguments": {}}),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let n = stream.next_message().expect("the pool's list change");
    assert_eq!(n["method"], "notifications/tools/list_changed", "{n}");
    assert_eq!(
        n["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"], 43,
        "{n}"
    );
}

#[test]
fn a_legacy_pool_over_tls_serves_calls_and_mid_call_questions() {
    use crate::support::tls::{Ca, TempDir};
    if !ServerKind::TypeScriptV1.installed() {
        return;
    }
    let dir = TempDir::new("legacy-tls");
    let ca = Ca::new("legacy CA");
    let (cert, key) = ca
        .server("legacy", &["127.0.0.1"], 30)
        .write(&dir, "legacy");
    let ca_file = dir.write("ca.pem", &ca.pem);
    let env = [
        ("MCP_EDGE_TLS_CERT", cert.to_str().unwrap()),
        ("MCP_EDGE_TLS_KEY", key.to_str().unwrap()),
    ];
    let ts = LegacyServer::start_with(ServerKind::TypeScriptV1, 0, &env);
    let cfg = config(
        &[],
        &format!(
            "  ts:\n    instances: [{}]\n    era: 2025-11-25\n    tls: {{ ca_file: {} }}\ndefault_route: {{pool: ts}}\n",
            ts.addr,
            ca_file.display()
        ),
    );
    let gw = RunningGateway::start(cfg).unwrap();
    let calls =
        "add={\"a\":2,\"b\":3};confirm_deploy={\"service\":\"billing\",\"environment\":\"prod\"}";
    let url = format!("http://{}/mcp", gw.mcp_addr);
    let Some(out) = super::modern_client(&url, calls, None) else {
        return;
    };
    assert_eq!(out["ok"], true, "{out}");
    assert!(
        super::servers::text(&out, "add").starts_with("5 (from"),
        "{out}"
    );
    assert!(
        super::servers::text(&out, "confirm_deploy").starts_with("deployed billing to prod"),
        "{out}"
    );
    let m = crate::support::scrape(&gw);
    let how = |c: &str| {
        let c = format!("connection=\"{c}\"");
        crate::support::sample(
            &m,
            "mcp_edge_legacy_connections_total",
            &["leg=\"server\"", &c],
        )
    };
    // Over TLS too, the requests to the server go on connections kept between them (a TLS
    // connection idle between answers has nothing to read, so none is dropped for it).
    assert!(
        how("kept") >= 1.0,
        "new {} kept {}",
        how("new"),
        how("kept")
    );
}
