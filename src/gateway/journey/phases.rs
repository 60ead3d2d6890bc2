//! The proxy's phases, as every driver of a request calls them. pingora's pipe calls
//! [`super::super::proxy::Proxy`]'s phases itself; the gateway's own drivers (the direct leg,
//! [`super::direct`], and the leg to 2025-era servers, [`super::bridge::back`]) call the same
//! phases, through pingora's `ProxyHttp` trait: balance is `upstream_peer`, the upstream head
//! `upstream_request_filter`, a connect failure `fail_to_connect`, the answer
//! `response_filter` and `response_body_filter`. So each step (balancing, the upstream head, a
//! failure, the answer) has one caller, its phase, whichever driver carries the request; a
//! driver owns only its connection, its attempt loop and its framing.
//!
//! The one exception: the rest of a long event stream handed over outside the pipeline
//! ([`super::detached`]) has no pingora session left to call a phase with; its chunks go
//! through [`super::response::on_body`], the step `response_body_filter` calls.

use pingora::proxy::ProxyHttp;

use super::request::RequestCtx;

/// What a driver calls: the proxy's phases (`ProxyHttp` over this gateway's request context).
pub(crate) trait Phases: ProxyHttp<CTX = RequestCtx> + Send + Sync {}

impl<P: ProxyHttp<CTX = RequestCtx> + Send + Sync> Phases for P {}
