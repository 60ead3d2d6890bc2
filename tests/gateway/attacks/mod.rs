//! Attacks on what the gateway added for HTTP/2, auth and framing, each refused at its root:
//! a body without a declared length (h2 DATA, HTTP/1.1 chunked) checked before any instance is
//! chosen (`framing`), the h2 → HTTP/1.1 translation (`h2_translation`), headers the gateway
//! asserts that a client tries to delete or shadow (`asserted`), and a listener that must keep
//! answering after each hostile request (`watchdog`). Loopback only; every wait is bounded.

mod asserted;
mod framing;
mod h2_translation;
mod h2wire;
mod watchdog;

use std::net::SocketAddr;

use crate::support::{free_port, META};
use mcp_edge::config::Config;
use mcp_edge::gateway::RunningGateway;

/// A gateway with an h2c listener beside its HTTP/1.1 one, in front of one instance (active
/// health checks off, so every connection the instance accepts is a test request's).
pub struct Edge {
    pub gw: RunningGateway,
    pub h2c: SocketAddr,
}

/// `up` is the pool's one instance.
pub fn edge(up: SocketAddr, extra: &str) -> Edge {
    let h2c = SocketAddr::from(([127, 0, 0, 1], free_port()));
    // work_stealing: one process starts several gateways in turn (as tests/support does).
    let y = format!(
        "work_stealing: true\nlisten:\n  mcp: 127.0.0.1:{}\n  extra: [ {{ address: {h2c}, h2c: true }} ]\n  admin: 127.0.0.1:{}\npools:\n  default:\n    instances: [{}]\n    health: {{ check: off }}\ndefault_route: {{ pool: default }}\n{extra}",
        free_port(),
        free_port(),
        up
    );
    let cfg = Config::parse(&y, "attacks.yaml").unwrap_or_else(|e| panic!("{e}\n{y}"));
    Edge {
        gw: RunningGateway::start(cfg).unwrap_or_else(|e| panic!("{e}\n{y}")),
        h2c,
    }
}

/// A tools/call body for `name` padded to at least `len` bytes.
pub fn padded_call(id: u64, name: &str, len: usize) -> String {
    let with = |pad: &str| {
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{name}","arguments":{{"p":"{pad}"}},{META}}}}}"#
        )
    };
    let short = with("").len();
    with(&"x".repeat(len.saturating_sub(short)))
}

pub fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

pub fn json(b: &[u8]) -> serde_json::Value {
    serde_json::from_slice(b).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(b)))
}
