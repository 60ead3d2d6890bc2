//! mcp-edge: an edge gateway for fleets of stateless MCP servers (revision 2026-07-28).
//!
//! How a request travels through the gateway ([`gateway`]): routed, authenticated and limited
//! by the headers it *claims* (`Mcp-Method`, `Mcp-Name`), its body checked against them
//! ([`mcp::check`]) before any instance is chosen, then balanced, forwarded and observed. The
//! journey is told once, stage by stage, in `docs/architecture.md` ("How a request travels");
//! [`gateway`]'s module documentation maps its stages to pingora's phases and to files.
//!
//! The same protocol module serves the reference MRTR server ([`backend`]) and the load tester
//! ([`loadtest`]); [`demo`] runs all three in one process.

// The documentation is the contributors' map of the code (`cargo doc --document-private-items`):
// a module's docs name the crate-private items that do its work.
#![allow(rustdoc::private_intra_doc_links)]

pub mod auth;
pub mod backend;
pub mod config;
pub mod credentials;
pub mod demo;
pub(crate) mod fetch;
pub mod gateway;
pub mod init;
pub mod loadtest;
pub mod mcp;
pub mod pins_cli;
pub mod tls_util;
pub(crate) mod values;
