//! mcp-edge: an edge gateway for fleets of stateless MCP servers (revision 2026-07-28).
//!
//! How a request travels through the gateway ([`gateway`]):
//!
//! 1. **route, authenticate and limit** by the headers it *claims* (`Mcp-Method`, `Mcp-Name`),
//!    before the body (with `auth:`, [`auth`] verifies the bearer token and decides per tool);
//! 2. **inspect**: the bounded body is read once and its envelope parsed once ([`mcp::envelope`]);
//! 3. **validate**: headers against the body ([`mcp::check`]), or skipped when sampled out;
//! 4. **balance**: pick an instance of the route's pool (round robin or consistent hash);
//! 5. **forward**: the body unchanged; responses, SSE included, streamed back unbuffered;
//! 6. **observe**: metrics and one access-log line.
//!
//! The same protocol module serves the reference MRTR server ([`backend`]) and the load tester
//! ([`loadtest`]); [`demo`] runs all three in one process.

pub mod auth;
pub mod backend;
pub mod config;
pub mod demo;
pub mod gateway;
pub mod loadtest;
pub mod mcp;
pub mod tls_util;
