//! Gateway configs for the TLS tests: a gateway YAML in front of recording upstreams, parsing,
//! loopback addresses, a tools/call request.

use std::net::SocketAddr;

use crate::support::{call, call_headers, free_port, post_bytes, refs, Upstreams};
use mcp_edge::config::Config;

/// A gateway whose `listen.mcp` is `mcp` (YAML), in front of `up`, plus extra YAML.
pub fn gateway_yaml(up: &Upstreams, mcp: &str, extra: &str) -> String {
    let list: Vec<String> = up.addrs.iter().map(|a| a.to_string()).collect();
    format!(
        "work_stealing: true\nlisten:\n  mcp: {mcp}\n  admin: 127.0.0.1:{}\npools:\n  default:\n    instances: [{}]\n    health: {{ check: off }}\ndefault_route: {{ pool: default }}\n{extra}",
        free_port(),
        list.join(", ")
    )
}

pub fn parse(y: &str) -> Config {
    Config::parse(y, "test.yaml").unwrap_or_else(|e| panic!("{e}\n{y}"))
}

pub fn loopback(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

pub fn call_request(id: u64) -> Vec<u8> {
    let h = call_headers("echo");
    post_bytes(&refs(&h), call(id, "echo").as_bytes())
}
