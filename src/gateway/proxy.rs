//! The pingora [`ProxyHttp`]: a thin adapter whose phases call the journey
//! ([`super::journey`]): `request_filter` runs the pipeline's stages in the order of their one
//! list ([`super::journey::pipeline`] over [`super::stages::pipeline::STAGES`]), the later
//! phases call the same step functions the direct leg calls (balance, response, failure). The
//! map of the default path is in [`super`] (`gateway/mod.rs`).

use async_trait::async_trait;
use bytes::Bytes;
use pingora::http::ResponseHeader;
use pingora::prelude::*;
use pingora::proxy::{FailToProxy, ProxyHttp, Session};
use pingora::upstreams::peer::HttpPeer;
use std::sync::Arc;
use std::time::Duration;

use super::journey::live::Live;
use super::journey::request::Progress;
use super::journey::request::RequestCtx;
use super::journey::steps::{cut_off, keep_alive_policy};
use super::journey::{auth, bridge, direct, failure, forward, observe, pipeline, response};
use super::stages::answer::{self, too_large};
use super::stages::inspect;
use super::transport::upstream_h1;

/// The pingora service.
pub(crate) struct Proxy {
    live: Arc<Live>,
    /// Idle connections to plain HTTP/1.1 instances (the direct leg's and the own leg's).
    upstreams: Arc<upstream_h1::Pool>,
}

impl Proxy {
    pub(crate) fn new(live: Arc<Live>, upstreams: Arc<upstream_h1::Pool>) -> Self {
        Proxy { live, upstreams }
    }
}

#[async_trait]
impl ProxyHttp for Proxy {
    type CTX = RequestCtx;

    fn new_ctx(&self) -> RequestCtx {
        RequestCtx::new(self.live.load())
    }

    /// A request a 2025-era client's call carries through this pipeline inside the process
    /// takes its own 2026 head here, before any phase reads one (`journey::bridge::inside`).
    async fn early_request_filter(
        &self,
        session: &mut Session,
        _ctx: &mut RequestCtx,
    ) -> Result<()> {
        bridge::inside::adopt(session);
        Ok(())
    }

    /// Only a request that may be a 2025-era client's starts requests of its own.
    fn allow_spawning_subrequest(&self, session: &Session, _ctx: &RequestCtx) -> bool {
        bridge::inside::may_spawn(session)
    }

    /// Admit, route and limit on what the headers claim, before the body.
    async fn request_filter(&self, session: &mut Session, ctx: &mut RequestCtx) -> Result<bool> {
        seen(ctx, "request_filter");
        let gw = ctx.gw.clone();
        session.set_read_timeout(Some(gw.config.timeouts.downstream_read));
        session.set_write_timeout(Some(gw.config.timeouts.downstream_write));
        keep_alive_policy(session, &gw);

        // 0. The OAuth Protected Resource Metadata (RFC 9728), when auth is on.
        if let Some(answered) = auth::metadata(session, &gw).await? {
            return Ok(answered);
        }

        // A client of the 2025 era: the protocol bridge answers it whole, carrying its requests
        // through this pipeline as 2026 requests (`journey::bridge`): eras are translated at
        // the edge, so no stage below sees one. (Boxed: the bridge's state, the largest of any
        // step's, is then no part of every other request's.)
        if let Some(era) = bridge::legacy_era(session) {
            if let Some(answered) = Box::pin(bridge::front(self, session, ctx, era)).await? {
                return Ok(answered);
            }
        }

        // The stages, in the order of the one list (`stages::pipeline::STAGES`): on the head,
        // then on the body where it is in hand, then the pool's (`journey::pipeline`). (A
        // passed-through session's answer, stream or end is no request: it goes to its
        // instance, `journey::bridge::pass`.)
        if ctx.pass.as_ref().is_none_or(|p| p.walks) {
            if let Some(answered) = pipeline::on_head(session, ctx, &gw).await? {
                return Ok(answered);
            }
            if let Some(answered) = pipeline::on_body(session, ctx, &gw).await? {
                return Ok(answered);
            }
        }
        if let Some(answered) = pipeline::on_pool(session, ctx, &gw).await? {
            return Ok(answered);
        }

        // A pool of 2025-era servers: over the gateway's session with an instance, its mid-call
        // questions turned into `input_required` (`journey::bridge::back`).
        if let Some(version) = bridge::back::takes(ctx) {
            return Box::pin(bridge::back::forward(self, session, ctx, version)).await;
        }

        // A body in hand, for a plain HTTP/1.1 pool: forwarded here, on the direct leg.
        if direct::takes(session, ctx) {
            return direct::forward(self, session, ctx, &self.upstreams).await;
        }
        Ok(false)
    }

    /// Balance: pick an instance of the route's pool.
    async fn upstream_peer(
        &self,
        session: &mut Session,
        ctx: &mut RequestCtx,
    ) -> Result<Box<HttpPeer>> {
        seen(ctx, "upstream_peer");
        let headers = &session.req_header().headers;
        let peer = forward::choose(headers, ctx)?;
        Ok(Box::new(peer))
    }

    /// Forward: the request as the client sent it, minus hop-by-hop headers.
    async fn upstream_request_filter(
        &self,
        _session: &mut Session,
        upstream: &mut pingora::http::RequestHeader,
        ctx: &mut RequestCtx,
    ) -> Result<()> {
        seen(ctx, "upstream_request_filter");
        forward::upstream_headers(upstream, ctx)
    }

    /// Inspect and validate: hold the body until it is complete, check it, release it whole.
    async fn request_body_filter(
        &self,
        session: &mut Session,
        body: &mut Option<Bytes>,
        end_of_stream: bool,
        ctx: &mut RequestCtx,
    ) -> Result<()> {
        if end_of_stream && inspect::trailers_pending(session) {
            // pingora read the data's end, not the stream's: an h2 trailer section follows.
            return Err(cut_off(ctx, answer::trailers(), None));
        }
        match &mut ctx.progress {
            Progress::Streaming => {
                let limit = ctx.gw.config.limits.max_body_bytes;
                // Header-only fast path: stream through, bounded.
                ctx.body_len += body.as_ref().map_or(0, Bytes::len);
                if ctx.body_len > limit {
                    return Err(cut_off(ctx, too_large(limit), None));
                }
                if end_of_stream {
                    // The whole request went to the instance (counted once, whatever the
                    // connect retries before it).
                    ctx.count_delivery();
                }
                Ok(())
            }
            Progress::Holding(_) => pipeline::hold_chunk(session, body, end_of_stream, ctx),
            // Checked before the upstream was chosen: the body passes as it is.
            _ => {
                if end_of_stream {
                    ctx.count_delivery();
                }
                Ok(())
            }
        }
    }

    /// Name the instance that served the response; watch JSON responses for `input_required`.
    async fn response_filter(
        &self,
        _session: &mut Session,
        upstream_response: &mut ResponseHeader,
        ctx: &mut RequestCtx,
    ) -> Result<()> {
        seen(ctx, "response_filter");
        response::on_header(ctx, upstream_response)
    }

    fn response_body_filter(
        &self,
        _session: &mut Session,
        body: &mut Option<Bytes>,
        end_of_stream: bool,
        ctx: &mut RequestCtx,
    ) -> Result<Option<Duration>> {
        seen(ctx, "response_body_filter");
        response::on_body(ctx, body, end_of_stream);
        Ok(None)
    }

    /// A request that never reached its instance may go to another one.
    fn fail_to_connect(
        &self,
        _session: &mut Session,
        _peer: &HttpPeer,
        ctx: &mut RequestCtx,
        e: Box<Error>,
    ) -> Box<Error> {
        seen(ctx, "fail_to_connect");
        failure::connect_failed(ctx, e)
    }

    /// Answer a refusal found mid-body, or an upstream failure, with a JSON-RPC error body.
    async fn fail_to_proxy(
        &self,
        session: &mut Session,
        e: &Error,
        ctx: &mut RequestCtx,
    ) -> FailToProxy {
        seen(ctx, "fail_to_proxy");
        failure::answer(session, e, ctx).await
    }

    fn suppress_error_log(&self, _session: &Session, ctx: &RequestCtx, _error: &Error) -> bool {
        // Refusals are logged once, in the access log.
        ctx.answer.is_some()
    }

    /// Observe: metrics and one access-log line.
    async fn logging(&self, session: &mut Session, _e: Option<&Error>, ctx: &mut RequestCtx) {
        if ctx.detached {
            return;
        }
        let status = session.response_written().map_or(0, |r| r.status.as_u16());
        let headers = &session.req_header().headers;
        #[cfg(test)]
        pipeline::trace::record(headers, ctx.ran, &ctx.phases);
        observe::finish_request(ctx, status, session.body_bytes_sent(), headers);
    }
}

/// A phase ran for this request (recorded in tests only: the direct leg's and pingora's pipe's
/// phases are compared there; nothing in a release build).
fn seen(_ctx: &mut RequestCtx, _phase: &'static str) {
    #[cfg(test)]
    _ctx.phases.push(_phase);
}
