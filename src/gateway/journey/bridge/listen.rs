//! The standalone stream of a 2025-era session (`GET` with its session id): the gateway opens
//! the 2026 `subscriptions/listen` for every list change and the resources the session
//! subscribed to through its own pipeline as the session's client (so a federated endpoint's
//! merged listen stream serves it too), and relays each list change and resource update as it
//! arrives, without the 2026 subscription id (`mcp::legacy::to_standalone`). When the
//! session's subscriptions change ([`super::subscribe`]) it opens the listen again with them,
//! and drops the old one once the new one is open. A fleet that offers no listen stream leaves
//! the session without one: `405`, as the 2025 spec allows; so does a gateway with no plain MCP
//! listener, which the listen request goes to on loopback ([`super::hop`]). A comment line
//! every [`KEEPALIVE`] keeps intermediaries from closing an idle stream and finds a client that
//! left. At most `legacy.max_streams` are open on a replica (`stages::bridge::streams`); past
//! it a `GET` gets 503 + `Retry-After` + -31007.

use bytes::Bytes;
use pingora::prelude::*;
use pingora::proxy::Session;
use std::time::Duration;

use super::hop::Leg;
use super::out::Out;
use super::session::LegacySession;
use super::{Bridge, Input};
use crate::gateway::journey::detached;
use crate::gateway::journey::request::RequestCtx;
use crate::gateway::journey::steps::refuse;
use crate::gateway::stages::bridge::streams::StreamSlot;
use crate::gateway::stages::bridge::subscribed::Watch;
use crate::mcp::methods::SUBSCRIPTIONS_LISTEN;
use crate::mcp::{codes, legacy, Rejection};

/// How often an idle standalone stream carries a comment line.
const KEEPALIVE: Duration = Duration::from_secs(15);

/// Serve the standalone stream of session `s`.
pub(super) async fn stream(
    session: &mut Session,
    ctx: &mut RequestCtx,
    (bridge, input): (&Bridge, &Input),
    s: &LegacySession,
) -> Result<bool> {
    let gw = ctx.gw.clone();
    if bridge.hop.is_none() {
        return no_listener(session, ctx).await;
    }
    let max = gw.config.legacy.max_streams;
    let Some(_slot) = bridge.streams.take(max, &gw.metrics.bridge.streams) else {
        return too_many(session, ctx, max).await;
    };
    let mut follow = Follow {
        watch: bridge.subscribed.follow(s),
        input: input.clone(),
        session: s.clone(),
    };
    let leg = match follow.open(bridge, ctx).await {
        Ok(leg) if leg.is_stream() => leg,
        Ok(leg) => return not_offered(session, ctx, leg.status()).await,
        Err(rej) => return refuse(session, ctx, rej, None).await,
    };
    let mut out = Out {
        session,
        streaming: false,
    };
    out.open().await?;
    if detached::can_take(out.session) {
        // The rest leaves the pipeline: an open stream then holds its connection, the leg and
        // the slot, not the pipeline's state.
        let relay = Relay {
            leg,
            follow,
            beat: keepalive().await,
            _slot,
        };
        detached::hand_over(session, ctx, relay)
            .await
            .map_err(|e| e.into_down())?;
        return Ok(true);
    }
    relay(out, ctx, leg, follow).await
}

/// What a stream follows of its session's resource subscriptions, and what it needs to open
/// its listen again when they change.
struct Follow {
    /// `None`: this replica follows the most sessions it may; the stream keeps the URIs it
    /// started with.
    watch: Option<Watch>,
    input: Input,
    session: LegacySession,
}

impl Follow {
    /// The session's subscriptions changed (never, when none are followed).
    async fn changed(&mut self) {
        if let Some(w) = &mut self.watch {
            if w.uris.changed().await.is_ok() {
                return;
            }
        }
        std::future::pending().await
    }

    /// Open the listen request for every list change and the URIs subscribed now, through the
    /// pipeline as the session's client; the change is then taken (asked for, or the stream
    /// ends for want of a listen).
    async fn open(&mut self, bridge: &Bridge, ctx: &RequestCtx) -> Result<Leg, Rejection> {
        let uris = match &mut self.watch {
            Some(w) => w.uris.borrow_and_update().clone(),
            None => Default::default(),
        };
        let params = legacy::standalone_listen_params(&uris.list);
        let (caps, info) = (&self.session.capabilities, &self.session.client_info);
        let body = legacy::to_modern(SUBSCRIPTIONS_LISTEN, Some(&params), 1, caps, info, None);
        let carry = super::legs::carried(&self.input, Vec::new());
        let to = (SUBSCRIPTIONS_LISTEN, None);
        let leg = super::legs::open((bridge, None), ctx, &self.input, to, &body, carry).await;
        if let Some(w) = &self.watch {
            w.took(uris.version);
        }
        leg
    }

    /// The listen again, after a change: `None` when the fleet gave no stream (this one ends;
    /// the client's reconnection asks again).
    async fn reopen(&mut self, ctx: &RequestCtx) -> Option<Leg> {
        let gw = ctx.gw.clone();
        match self.open(&gw.bridge, ctx).await {
            Ok(leg) if leg.is_stream() => Some(leg),
            Ok(leg) => {
                tracing::debug!(
                    "a standalone stream's listen, reopened: HTTP {}",
                    leg.status()
                );
                None
            }
            Err(rej) => {
                tracing::debug!("a standalone stream's listen, reopened: {}", rej.message);
                None
            }
        }
    }
}

/// A beat every [`KEEPALIVE`], its first tick past.
async fn keepalive() -> tokio::time::Interval {
    let mut beat = tokio::time::interval(KEEPALIVE);
    beat.tick().await;
    beat
}

/// The relay as the body of a stream outside the pipeline (`detached`): each list change as a
/// 2025-era event, a comment line on each beat, the end with the leg's. The client's leaving is
/// watched by the stream's pump.
struct Relay {
    leg: Leg,
    follow: Follow,
    beat: tokio::time::Interval,
    _slot: StreamSlot,
}

impl detached::Source for Relay {
    async fn piece(
        &mut self,
        ctx: &mut RequestCtx,
    ) -> Result<(Option<Bytes>, bool), detached::Cut> {
        loop {
            tokio::select! {
                _ = self.follow.changed() => match self.follow.reopen(ctx).await {
                    Some(leg) => self.leg = leg,
                    None => return Ok((None, true)),
                },
                m = self.leg.next_message() => match m {
                    Ok(Some(m)) => {
                        if let Some(n) = legacy::to_standalone(m) {
                            let event = crate::mcp::sse_event(n.to_string().as_bytes());
                            return Ok((Some(Bytes::from(event)), false));
                        }
                    }
                    Ok(None) | Err(_) => return Ok((None, true)),
                },
                _ = self.beat.tick() => return Ok((Some(Bytes::from_static(COMMENT)), false)),
            }
        }
    }

    fn done(self) {}
}

/// The keep-alive comment line.
const COMMENT: &[u8] = b": keepalive\n\n";

/// Relay the listen stream's list changes until it ends or the client leaves.
async fn relay(
    mut out: Out<'_>,
    ctx: &RequestCtx,
    mut leg: Leg,
    mut follow: Follow,
) -> Result<bool> {
    let mut beat = keepalive().await;
    loop {
        // `next_message` only waits inside a socket read, which loses nothing when another
        // branch wins the race.
        tokio::select! {
            _ = follow.changed() => match follow.reopen(ctx).await {
                Some(l) => leg = l,
                None => {
                    out.session.write_response_body(None, true).await?;
                    return Ok(true);
                }
            },
            m = leg.next_message() => match m {
                Ok(Some(m)) => {
                    if let Some(n) = legacy::to_standalone(m) {
                        out.event(n.to_string().as_bytes()).await?;
                    }
                }
                Ok(None) | Err(_) => {
                    out.session.write_response_body(None, true).await?;
                    return Ok(true);
                }
            },
            _ = beat.tick() => {
                let comment = Bytes::from_static(COMMENT);
                out.session.write_response_body(Some(comment), false).await?;
            }
            // The client closed its side: the stream (and its place) ends now, not at the
            // next write.
            _ = out.session.downstream_session.read_body_or_idle(true) => return Ok(true),
        }
    }
}

/// The replica holds `max` standalone streams already: 503 + `Retry-After` + -31007.
async fn too_many(session: &mut Session, ctx: &mut RequestCtx, max: usize) -> Result<bool> {
    let msg = format!(
        "This replica holds its most standalone streams ({max}, legacy.max_streams): retry later, or use POST alone"
    );
    let rej = Rejection::new(503, codes::GATEWAY_OVERLOADED, "legacy-streams-full", msg)
        .with_data(serde_json::json!({"maxStreams": max, "retryAfterSeconds": 5}));
    ctx.extra_headers.push(("retry-after", "5".into()));
    refuse(session, ctx, rej, None).await
}

/// No standalone stream: the fleet answered the listen request with `status` and no stream.
async fn not_offered(session: &mut Session, ctx: &mut RequestCtx, status: u16) -> Result<bool> {
    let why = format!("the fleet answered its listen request with HTTP {status}");
    no_stream(session, ctx, &why).await
}

/// No plain MCP listener to carry the stream's listen request on: the session goes without a
/// standalone stream, its requests still served.
async fn no_listener(session: &mut Session, ctx: &mut RequestCtx) -> Result<bool> {
    let why = "this gateway has no plain MCP listener to carry the stream's listen request on";
    no_stream(session, ctx, why).await
}

/// The session goes without a standalone stream: `405` and `Allow`, as the 2025 spec allows.
async fn no_stream(session: &mut Session, ctx: &mut RequestCtx, why: &str) -> Result<bool> {
    let msg = format!("This endpoint offers no standalone stream ({why}): use POST");
    let rej = Rejection::new(405, codes::INVALID_REQUEST, "method-not-allowed", msg);
    ctx.extra_headers.push(("allow", "POST, DELETE".into()));
    refuse(session, ctx, rej, None).await
}
