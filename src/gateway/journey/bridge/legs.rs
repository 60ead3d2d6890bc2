//! How a 2025-era session's requests enter the gateway's own pipeline as 2026 requests, inside
//! the process when the client's request is at hand:
//!
//! - a call's leg, and a side request of the session (the `server/discover` behind
//!   `initialize`, a `tools/list` read to learn marks: [`send`]), on the client's own session
//!   ([`super::inline`]) when its whole journey stays in `request_filter` (a plain HTTP/1.1
//!   fleet on the direct leg), else as a subrequest of the client's request
//!   ([`super::inside`]): [`carry_leg`];
//! - a standalone stream's listen on the loopback hop ([`open`] with nothing started);
//!
//! and a leg given up when the client goes away ([`unless_gone`]).

use bytes::Bytes;
use pingora::prelude::*;
use pingora::proxy::Session;
use std::borrow::Cow;

use super::hop::{self, Answer};
use super::out::Out;
use super::{Bridge, Input};
use crate::gateway::journey::phases::Phases;
use crate::gateway::journey::request::RequestCtx;
use crate::mcp::{codes, sse, Rejection};

/// A side request of the session (`initialize`'s `server/discover`, a `tools/list` read to
/// learn marks) through the pipeline as the session's client, inside the process: its whole
/// answer. `Err`: the client went away.
pub(super) async fn send(
    via: Via<'_>,
    session: &mut Session,
    to: (&str, Option<&str>),
    body: Vec<u8>,
) -> Result<Result<Answer, Rejection>> {
    let carry = carried(via.3, Vec::new());
    let mut out = Out {
        session,
        streaming: false,
    };
    carry_leg(via, &mut out, to, (body, carry), false).await
}

/// What a leg goes through: the proxy's phases, the bridge, the client's request's context and
/// what the bridge read of its head.
pub(super) type Via<'a> = (&'a dyn Phases, &'a Bridge, &'a RequestCtx, &'a Input);

/// Carry one 2026 request of the session's client (`body`, with the `carry` headers) through
/// the pipeline, inside the process: on the client's own session when [`super::inline`] takes
/// it, else as a subrequest of the client's request. `relay`: the leg's notifications reach the
/// client as they arrive, on its event stream (a call's leg), else the answer is read whole (a
/// side request). `Err`: the client went away.
pub(super) async fn carry_leg(
    (phases, bridge, ctx, input): Via<'_>,
    out: &mut Out<'_>,
    to: (&str, Option<&str>),
    (body, carry): (Vec<u8>, Vec<(String, String)>),
    relay: bool,
) -> Result<Result<Answer, Rejection>> {
    if super::inline::takes(&ctx.gw, body.len()) {
        let head = match super::leg_head::head(
            out.session.req_header(),
            &input.path,
            to,
            &carry,
            body.len(),
        ) {
            Ok(h) => h,
            Err(e) => return Ok(Err(hop_failed(e.to_string()))),
        };
        let deadline = tokio::time::Instant::now() + leg_timeout(&ctx.gw.config);
        ctx.gw.metrics.bridge.inline_hop();
        let leg = (head, Bytes::from(body));
        let streaming = relay.then_some(&mut out.streaming);
        return super::inline::run(phases, out.session, leg, streaming, deadline).await;
    }
    let started = match start_inside(out.session, input, to, &carry, &body) {
        Ok(s) => s,
        Err(rej) => return Ok(Err(rej)),
    };
    let leg = open((bridge, started), ctx, input, to, &body, carry);
    match unless_gone(out.session, leg).await? {
        Ok(leg) if relay && leg.is_stream() => relay_notes(out, leg).await,
        Ok(leg) => Ok(unless_gone(out.session, leg.rest())
            .await?
            .map_err(hop_failed)),
        Err(rej) => Ok(Err(rej)),
    }
}

/// Read an event stream leg: each notification is written to the client as it arrives; the
/// response ends the leg and is returned as a JSON answer.
async fn relay_notes(out: &mut Out<'_>, mut leg: hop::Leg) -> Result<Result<Answer, Rejection>> {
    let (status, pass) = (leg.status(), leg.pass());
    loop {
        let m = match unless_gone(out.session, leg.next_message()).await? {
            Ok(Some(m)) => m,
            Ok(None) => break,
            Err(e) => return Ok(Err(hop_failed(e))),
        };
        if m.get("result").is_some() || m.get("error").is_some() {
            let body = serde_json::to_vec(&m).expect("a JSON value serializes");
            let content_type = Some(Cow::Borrowed(crate::mcp::media::JSON));
            return Ok(Ok(Answer {
                status,
                pass,
                content_type,
                body,
            }));
        }
        if m.get("method").is_some() && m.get("id").is_none() {
            out.event(m.to_string().as_bytes()).await?;
        }
    }
    let content_type = Some(Cow::Borrowed(sse::CONTENT_TYPE));
    Ok(Ok(Answer {
        status,
        pass,
        content_type,
        body: Vec::new(),
    }))
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
fn start_inside(
    session: &Session,
    input: &Input,
    (method, name): (&str, Option<&str>),
    carry: &[(String, String)],
    body: &[u8],
) -> Result<Option<super::inside::Started>, Rejection> {
    let head = super::leg_head::head(
        session.req_header(),
        &input.path,
        (method, name),
        carry,
        body.len(),
    )
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
