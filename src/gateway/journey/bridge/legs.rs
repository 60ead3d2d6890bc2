//! How a 2025-era session's requests enter the gateway's own pipeline as 2026 requests, inside
//! the process when the client's request is at hand:
//!
//! - a call's leg on the client's own session ([`super::inline`]), when its whole journey stays
//!   in `request_filter` (a plain HTTP/1.1 fleet on the direct leg), else as a subrequest of the
//!   client's request ([`super::inside`]);
//! - the session's side requests (the `server/discover` behind `initialize`, a `tools/list`
//!   read to learn marks) as subrequests ([`send`]);
//! - a standalone stream's listen on the loopback hop ([`super::hop`]);
//!
//! and a leg given up when the client goes away ([`unless_gone`]).

use bytes::Bytes;
use pingora::prelude::*;
use pingora::proxy::Session;

use super::hop::{self, Answer};
use super::{Bridge, Input};
use crate::gateway::journey::request::RequestCtx;
use crate::mcp::{codes, Rejection};

/// Send one 2026 request through the pipeline as the session's client; its whole answer: inside
/// the client's own pipeline when its `session` is at hand, else on the loopback hop.
pub(super) async fn send(
    (bridge, session): (&Bridge, Option<&Session>),
    ctx: &RequestCtx,
    input: &Input,
    (method, name): (&str, Option<&str>),
    body: &[u8],
) -> Result<Answer, Rejection> {
    let carry = carried(input, Vec::new());
    let to = (method, name);
    let started = match session {
        Some(s) => start_inside(s, input, to, &carry, body)?,
        None => None,
    };
    let leg = open((bridge, started), ctx, input, to, body, carry).await?;
    leg.rest().await.map_err(hop_failed)
}

/// The headers a request carries as they are: `carry`, and the client's `Authorization`.
pub(super) fn carried(input: &Input, mut carry: Vec<(String, String)>) -> Vec<(String, String)> {
    if let Some(a) = &input.authorization {
        carry.push(("authorization".into(), a.clone()));
    }
    carry
}

/// Send one 2026 request through the pipeline as the session's client; its answer as it
/// arrives. A request `started` inside the client's own pipeline ([`inside`]) is read from
/// there; any other goes on the loopback hop.
pub(super) async fn open(
    (bridge, started): (&Bridge, Option<super::inside::Started>),
    ctx: &RequestCtx,
    input: &Input,
    (method, name): (&str, Option<&str>),
    body: &[u8],
    carry: Vec<(String, String)>,
) -> Result<hop::Leg, Rejection> {
    let config = &ctx.gw.config;
    let timeout = leg_timeout(config);
    let counted = &ctx.gw.metrics.bridge.connections;
    if let Some(started) = started {
        counted.with_label_values(&["hop", "inside"]).inc();
        return hop::Leg::inside(started, timeout).await.map_err(hop_failed);
    }
    let Some(hop) = bridge.hop else {
        return Err(hop_failed("this gateway has no plain MCP listener".into()));
    };
    let req = hop::Request {
        path: &input.path,
        method,
        name,
        carry,
        body,
    };
    let bytes = req.to_bytes(hop);
    let speaks_for = input.client_ip.map(|ip| (&bridge.hops, ip));
    // Kept idle for half the time the listener keeps an idle client: the listener never
    // closes one under the bridge's feet in the common case.
    let kept = Some((&bridge.kept, config.timeouts.client_idle / 2));
    let times = (config.timeouts.connect, timeout);
    let leg = hop::Leg::open((hop, kept), &bytes, speaks_for, times)
        .await
        .map_err(hop_failed)?;
    let how = if leg.kept { "kept" } else { "new" };
    counted.with_label_values(&["hop", how]).inc();
    Ok(leg)
}

/// How long a leg's answer may take: the longer of the bridge's wait for a client's answers and
/// the upstream read timeout.
pub(super) fn leg_timeout(config: &crate::config::Config) -> std::time::Duration {
    config
        .legacy
        .answer_timeout
        .max(config.timeouts.upstream_read)
}

/// A call's leg started inside the client's own pipeline (`None`: this request cannot start
/// one; the loopback hop carries it).
pub(super) fn start_inside(
    session: &Session,
    input: &Input,
    (method, name): (&str, Option<&str>),
    carry: &[(String, String)],
    body: &[u8],
) -> Result<Option<super::inside::Started>, Rejection> {
    let head = super::inside::head(session, &input.path, (method, name), carry, body.len())
        .map_err(|e| hop_failed(e.to_string()))?;
    let body = Bytes::copy_from_slice(body);
    Ok(super::inside::start(session, head, body))
}

/// `work`, unless the client goes away first: then it is dropped (and with it the leg, whose
/// pipeline sees its client leave and closes the upstream request) and the call ends.
pub(super) async fn unless_gone<T>(
    session: &mut Session,
    work: impl std::future::Future<Output = T>,
) -> Result<T> {
    tokio::select! {
        biased;
        done = work => Ok(done),
        _ = session.downstream_session.read_body_or_idle(true) => {
            Err(Error::explain(ErrorType::ConnectionClosed, "the client went away").into_down())
        }
    }
}

/// A request the bridge could not carry into the pipeline: 502, the gateway's fault.
pub(super) fn hop_failed(e: String) -> Rejection {
    let msg = format!("The gateway could not carry the request into its pipeline: {e}");
    Rejection::new(502, codes::GATEWAY_UPSTREAM_UNAVAILABLE, "bridge-hop", msg)
}
