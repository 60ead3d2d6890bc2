//! The sessions the gateway holds with a 2025-era server (TypeScript SDK v1, which counts the
//! sessions it holds at `/stats`) are closed at the server: one left unused for
//! `legacy.server_session_idle` within moments, and every one when the gateway stops.

use mcp_edge::gateway::RunningGateway;
use serde_json::json;
use std::net::SocketAddr;
use std::time::Duration;

use super::servers::pool_line;
use super::{LegacyServer, ServerKind};
use crate::support::http::{call, request};
use crate::support::{config, eventually};

/// The sessions the server holds now.
fn open_at(server: SocketAddr) -> i64 {
    let stats = request(server, "GET", "/stats", &[], b"").json();
    stats["sessionsOpen"].as_i64().expect("the server's stats")
}

fn gateway(servers: &[LegacyServer], extra: &str) -> RunningGateway {
    let yaml = format!(
        "{}default_route: {{pool: ts}}\nshutdown: {{grace_period: 1s}}\n{extra}",
        pool_line("ts", servers)
    );
    // Graceful: stopping drains like SIGTERM, as a process's end does.
    RunningGateway::start_with(config(&[], &yaml), true).unwrap()
}

fn add(gw: &RunningGateway, caller: &str) {
    let r = call(
        gw.mcp_addr,
        1,
        "add",
        json!({"a": 1, "b": 2}),
        json!({}),
        Some(caller),
        json!({}),
    );
    assert_eq!(r.status, 200, "{}", r.text());
}

#[test]
fn an_idle_session_and_at_the_end_every_session_are_closed_at_the_server() {
    if !ServerKind::TypeScriptV1.installed() {
        return;
    }
    let ts = [LegacyServer::start(ServerKind::TypeScriptV1, 0)];
    let server = ts[0].addr;
    let gw = gateway(&ts, "legacy: { server_session_idle: 1s }\n");
    add(&gw, "alice");
    assert!(open_at(server) >= 1);
    // Unused for a second: closed without another request coming.
    let closed = eventually(Duration::from_secs(10), || open_at(server) == 0);
    assert!(
        closed,
        "the idle session is still open: {}",
        open_at(server)
    );

    let gw = gateway(&ts, "");
    add(&gw, "alice");
    add(&gw, "bob");
    assert_eq!(open_at(server), 2, "one session per caller");
    gw.shutdown();
    let closed = eventually(Duration::from_secs(10), || open_at(server) == 0);
    assert!(
        closed,
        "sessions left open after the gateway stopped: {}",
        open_at(server)
    );
}
