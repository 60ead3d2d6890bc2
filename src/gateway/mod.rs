//! The gateway: a pingora [`ProxyHttp`](pingora::proxy::ProxyHttp) ([`proxy::Proxy`]) whose
//! phases are a request's journey, in four layers, each a folder, each importing only the
//! layers below it (`tests/` checks it):
//!
//! | layer          | what it owns                                                                  |
//! |----------------|-------------------------------------------------------------------------------|
//! | [`runtime`]    | the process: server, reload, admin endpoints and console, DNS, `explain`       |
//! | [`proxy`]      | the pingora phases, calling the stages in journey order                        |
//! | [`stages`]     | what happens to a request: admit, route, authenticate, limit, inspect, validate, cache, balance, forward, answer, observe |
//! | [`transport`]  | how bytes move: listeners, TLS, the head deadline, parked connections, the upstream HTTP/1.1 client |
//! | [`telemetry`]  | what is recorded: metrics, flows, traces, the refusal ring                     |
//!
//! **The default path** (a plain HTTP/1.1 pool, `connections.upstream_leg: direct`, the body
//! checked) runs whole in pingora's first phase, `request_filter` ([`proxy`]), in this order:
//!
//! 1. the whole HTTP/1 head has arrived in time ([`transport::head_deadline`], below pingora);
//! 2. **admit** the head ([`stages::admission`]);
//! 3. **route** on the claimed `Mcp-Method`/`Mcp-Name` ([`stages::route`]; on a federated
//!    endpoint by the pools' catalogs, [`stages::federation`]);
//! 4. **authenticate** ([`stages::auth`]) and **limit** ([`stages::limit`],
//!    [`stages::concurrency`]), still on the claims; only then `100 Continue`;
//! 5. **read the body** whole, once, whatever its framing ([`stages::inspect`], through
//!    [`stages::steps::read_before_upstream`]) and **validate** it against the headers
//!    ([`stages::validate`]); a federated endpoint may answer here (merged lists, discovery);
//! 6. **cache**: a hit is answered here ([`stages::cache`]); the pool's own credential
//!    ([`stages::credentials`]);
//! 7. **forward** on the direct leg ([`stages::direct`]): it runs the stages pingora's later
//!    phases would, as plain functions: **balance** ([`stages::forward::choose`] over
//!    [`stages::balance`]), the upstream head ([`stages::forward::upstream_headers`]), connect
//!    retries ([`stages::failure::connect_failed`]), the **answer** on its way back
//!    ([`stages::response`]), a long event stream handed to its own task
//!    ([`stages::detached`]); the bytes go on the gateway's own HTTP/1.1 client
//!    ([`transport::upstream_h1`]);
//! 8. **observe** when the request ends ([`stages::observe`], in pingora's `logging` phase or
//!    at the end of a detached stream).
//!
//! A refusal at any step is a value ([`crate::mcp::Rejection`]) the phase hands to one place,
//! [`stages::steps::refuse`], which writes the JSON-RPC answer ([`stages::answer`]).
//!
//! **pingora's pipe** carries the rest: TLS and h2 pools, protocol upgrades, bodies streamed
//! unchecked (sampled out) past the read-whole size, and `upstream_leg: pingora`. There a body up
//! to 64 KiB is still read and checked in `request_filter`; a larger one is held chunk by chunk
//! in `request_body_filter`, checked at its end and released whole (pingora replays a body read
//! early only from its 64 KiB retry buffer). Then `upstream_peer` balances, `upstream_request_filter`
//! forwards, `response_filter`/`_body` run [`stages::response`], `fail_to_connect`/`_proxy` run
//! [`stages::failure`], and `logging` observes. `inspect::Plan` is the one table of these paths.
//!
//! A request's state is one [`RequestCtx`] ([`stages::request`]); where its body is, is one
//! [`stages::request::Progress`]. The rules it runs under are one [`Gateway`] ([`stages::state`]),
//! swapped whole on reload ([`Live`]) by [`runtime::server`]; [`runtime::admin`] serves
//! `/metrics`, `/healthz`, `/readyz`, `/ui`, `POST /-/reload`, `POST /-/explain` and
//! `POST /-/cache/purge`.

pub mod proxy;
pub mod runtime;
pub mod stages;
pub mod telemetry;
pub mod transport;

pub use proxy::Proxy;
pub use runtime::server::{build_server, serve, RunningGateway};
pub use stages::live::Live;
pub use stages::request::RequestCtx;
pub use stages::state::Gateway;
