//! The gateway as clients meet it: every test here drives a running gateway (in process, or an
//! `mcp-edge serve` child) over loopback sockets, one module per concern: the header↔body check
//! and the spoofing rules (`cases`, `spoofing`, `keys`, `param_headers`), forwarding over
//! HTTP/1.1 and h2 (`forward`, `http2`, `direct_leg`, `upstream_leg`, `detached_stream`,
//! `parked`), limits and metrics (`limits_metrics`, `global_limits`, `limit_flood`,
//! `concurrency`), the argument policy (`policy`), the audit trail (`audit`), MRTR flows, tasks and traces (`flows`, `tasks`, `traces`), routing and
//! balancing (`routing`), the edge cache (`cache`), auth and upstream credentials (`auth`,
//! `auth_sdk`, `credentials`), TLS on both sides (`tls`, `upstream_tls`), federation
//! (`federation`), the console and explain (`console`), and hostile clients (`abuse`,
//! `attacks`). Peers outside Rust, each skipped loudly when missing (failing under
//! `MCP_EDGE_REQUIRE_PEERS=1`, see `support::programs`): redis-server (`global_limits`),
//! curl and h2load (`http2`, `tls`), promtool (`limits_metrics`), node with the TypeScript SDK
//! client in `MCP_EDGE_TS_SDK_DIR` (`auth_sdk`, `tls`, `federation`), the SDK servers of
//! tests/peers in `MCP_EDGE_PEERS_DIR` (`federation`), node-oidc-provider of tests/oidc in
//! `MCP_EDGE_OIDC_DIR` (`credentials`), Chromium with puppeteer-core of tests/console in
//! `MCP_EDGE_CONSOLE_PEERS_DIR` (`console`). The loss measurements under load (kills, reloads,
//! upgrades) are in tests/faults, which runs them one at a time.

#[path = "../oidc/mod.rs"]
mod oidc;
#[path = "../peers/mod.rs"]
mod peers;
#[path = "../support/mod.rs"]
mod support;

mod abuse;
mod attacks;
mod audit;
mod auth;
mod auth_sdk;
mod bridge;
mod cache;
mod cases;
mod concurrency;
mod console;
mod credentials;
mod detached_stream;
mod direct_leg;
mod federation;
mod flows;
mod forward;
mod global_limits;
mod http2;
mod keys;
mod limit_flood;
mod limits_metrics;
mod overload;
mod param_headers;
mod parked;
mod pins;
mod policy;
mod routing;
mod seal;
mod seal_replicas;
mod spoofing;
mod tasks;
mod tls;
mod traces;
mod upstream_leg;
mod upstream_tls;
