//! Transport: how bytes move, below any MCP meaning. Imports only [`super::telemetry`].
//!
//! - Towards clients: [`listeners`] (plain, TLS, h2c), [`tls`] (certificates, mTLS),
//!   [`client_hello`] (the ALPN offer), [`head_deadline`] (the whole HTTP/1 head under a
//!   deadline, before pingora parses it), [`parked`] (idle keep-alive connections held without
//!   a task), [`h2_to_h1`] (an h2 request's head seen as HTTP/1.1 would see it).
//! - Towards instances: [`upstream_h1`] (the gateway's own HTTP/1.1 client and its connection
//!   pool: head and body in one write), [`upstream_tls`] (TLS peers, for pingora's leg).

pub mod client_hello;
pub mod h2_to_h1;
pub(crate) mod head_deadline;
pub mod listeners;
pub(crate) mod parked;
pub(crate) mod tls;
pub mod upstream_h1;
pub(crate) mod upstream_tls;
