//! The one test-support tree of the integration tests. Each test binary's `main.rs` says
//! `#[path = "../support/mod.rs"] mod support;` and its modules use `crate::support::…` as they
//! need, by concern:
//!
//! - `support::http`: a blocking HTTP/1.1 client over `TcpStream` (every header byte under the
//!   test's control), JSON-RPC builders for MCP 2026-07-28, an incremental SSE reader;
//! - `support::upstream` (re-exported as `support::*`): recording upstreams, gateway config
//!   builders, `call`, `eventually`, `free_port`;
//! - `support::tasks`: Tasks-extension requests and polling (also at `support::http::`);
//! - `support::spawn`: `mcp-edge backend` processes, killed on drop;
//! - `support::metrics` (re-exported): `scrape` a gateway's /metrics, `sample` one metric;
//! - `support::limits`: a keep-alive client, a real `redis-server`, `mcp-edge serve` processes;
//! - `support::tls`: a run-time CA (rcgen), rustls configs, an h2 client, TLS upstreams;
//! - `support::auth`: run-time test keys, a loopback JWKS server, `auth:` sections;
//! - `support::cache`, `support::scripted`: scripted upstreams for the edge-cache tests;
//! - `support::loadtest`: an in-process MRTR target for the load tester.
//! - `support::naive_mrtr`: an MRTR server that protects nothing (the seal tests).
//! - `support::background`: the runtime thread every test server above runs on, stopped on drop.
//! - `support::raw`: a raw upstream (every answer byte the test's) and a gateway in front of it.
//! - `support::programs`: the programs outside Rust a test may need (redis-server, curl, h2load,
//!   node, promtool): [`programs::have`] skips loudly, or fails under `MCP_EDGE_REQUIRE_PEERS=1`.
//!
//! Each test binary uses a different subset, hence the allowances.
#![allow(dead_code, unused_imports)]

pub mod auth;
pub mod background;
pub mod cache;
pub mod http;
pub mod limits;
pub mod loadtest;
pub mod metrics;
pub mod naive_mrtr;
pub mod programs;
pub mod raw;
pub mod scripted;
pub mod spawn;
pub mod tasks;
pub mod tls;
pub mod upstream;

pub use metrics::{sample, scrape};
pub use upstream::*;
