//! `connections:` what each client connection costs in memory: the read and write buffers
//! pingora puts in front of every accepted socket (its `L4BufferSettings`), and whether idle
//! keep-alive connections wait parked. The schema and its validation live here; the listeners
//! apply the buffers (`gateway::transport::listeners`), `gateway::transport::parked` the parking.

use serde::Deserialize;

use super::{ConfigError, Positions};

/// Largest buffer accepted (a typo such as an extra digit should not cost gigabytes).
pub(crate) const MAX_BUFFER: usize = 16 * 1024 * 1024;

/// Per-connection buffers of every listener (MCP and admin).
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ConnectionsConfig {
    /// Bytes of the read buffer each client connection holds for its whole life; 0 reads
    /// straight from the socket into the request-head buffer. pingora's default is 65536; 1024
    /// measured the same throughput at 1/64 of the memory (reads of bodies and of TLS records
    /// larger than the buffer bypass it). See docs/benchmarks.md, "Memory per connection".
    #[serde(default = "d_read_buffer")]
    pub read_buffer: usize,
    /// Bytes of the write buffer each client connection holds (pingora's default: 1460, one
    /// MSS); 0 writes straight through.
    #[serde(default = "d_write_buffer")]
    pub write_buffer: usize,
    /// Plain HTTP/1.1 connections wait for their next request holding only their socket; the
    /// request pipeline's state is allocated when a request arrives (`gateway::transport::parked`), and an
    /// SSE stream on such a connection goes on without it once its head is written
    /// (`gateway::journey::detached`). `false`: pingora's own loop, which holds that state for the
    /// connection's whole life, open streams included.
    #[serde(default = "d_park_idle")]
    pub park_idle: bool,
    /// Who carries requests to plain (non-TLS) HTTP/1.1 pools: `direct`, a request whose body
    /// is in hand is forwarded straight from the gateway's first phase on its own HTTP/1.1
    /// client (`gateway::journey::direct`, `gateway::transport::upstream_h1`: head and body in
    /// one write, its own keep-alive pool), the rest through pingora's proxy pipe; or
    /// `pingora`, pingora's pipe and client for every request (kept to compare against and as
    /// a way back; 0.32x nginx against the direct leg's 0.40x in docs/benchmarks.md). TLS and
    /// h2/h2c pools always use pingora's.
    #[serde(default)]
    pub upstream_leg: UpstreamLeg,
}

/// See [`ConnectionsConfig::upstream_leg`].
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum UpstreamLeg {
    #[default]
    Direct,
    Pingora,
}

fn d_park_idle() -> bool {
    true
}

fn d_read_buffer() -> usize {
    1024
}
fn d_write_buffer() -> usize {
    1460
}

impl Default for ConnectionsConfig {
    fn default() -> Self {
        ConnectionsConfig {
            read_buffer: d_read_buffer(),
            write_buffer: d_write_buffer(),
            park_idle: d_park_idle(),
            upstream_leg: UpstreamLeg::default(),
        }
    }
}

/// Refuse buffers above [`MAX_BUFFER`].
pub(super) fn validate(
    c: &ConnectionsConfig,
    pos: &Positions,
    file: &str,
) -> Result<(), ConfigError> {
    for (key, v) in [
        ("read_buffer", c.read_buffer),
        ("write_buffer", c.write_buffer),
    ] {
        if v > MAX_BUFFER {
            return Err(ConfigError::at(
                file,
                pos.near(&format!("connections.{key}")),
                format!(
                    "connections.{key}: {v} bytes is above the {MAX_BUFFER} allowed (each client connection holds one; 0 turns the buffer off)"
                ),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::config::Config;

    fn load(extra: &str) -> Result<Config, String> {
        let text = format!("pools:\n  a: {{ instances: [127.0.0.1:1] }}\n{extra}");
        Config::parse(&text, "gateway.yaml").map_err(|e| e.to_string())
    }

    #[test]
    fn defaults() {
        let c = load("").unwrap().connections;
        assert_eq!((c.read_buffer, c.write_buffer), (1024, 1460));
        assert!(c.park_idle);
    }

    #[test]
    fn values_and_zero_are_taken() {
        let c = load("connections: { read_buffer: 0, write_buffer: 4096, park_idle: false }\n")
            .unwrap()
            .connections;
        assert_eq!((c.read_buffer, c.write_buffer), (0, 4096));
        assert!(!c.park_idle);
    }

    #[test]
    fn too_large_and_unknown_and_negative_are_refused_with_the_line() {
        let e = load("connections:\n  read_buffer: 999999999\n").unwrap_err();
        assert!(
            e.starts_with("gateway.yaml:4:16: connections.read_buffer: 999999999 bytes is above"),
            "{e}"
        );
        let e = load("connections: { read_bufer: 1 }\n").unwrap_err();
        assert!(
            e.contains("gateway.yaml:3") && e.contains("read_bufer"),
            "{e}"
        );
        let e = load("connections: { write_buffer: -1 }\n").unwrap_err();
        assert!(
            e.contains("gateway.yaml:3") && e.contains("write_buffer"),
            "{e}"
        );
    }
}
