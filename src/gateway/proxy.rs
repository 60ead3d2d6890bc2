//! The pingora [`ProxyHttp`]: its phases are the request's journey, each calling the journey's
//! steps ([`super::journey`]) and the stages whose verdicts it applies itself
//! ([`super::stages`]: admission, route, inspect, validate), in order. The map of the
//! default path is in [`super`] (`gateway/mod.rs`).

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
use super::journey::state::Gateway;
use super::journey::steps::{
    cut_off, hold_chunk, invite_body, keep_alive_policy, read_before_upstream, refuse,
    refuse_with_id, select_route, settle_doomed,
};
use super::journey::{
    auth, bridge, concurrency, credentials, direct, failure, federation, forward, limit, observe,
    response,
};
use super::stages::answer::{self, too_large};
use super::stages::{admission, inspect, route, validate};
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

    /// Admit, route and limit on what the headers claim, before the body.
    async fn request_filter(&self, session: &mut Session, ctx: &mut RequestCtx) -> Result<bool> {
        let gw = ctx.gw.clone();
        session.set_read_timeout(Some(gw.config.timeouts.downstream_read));
        session.set_write_timeout(Some(gw.config.timeouts.downstream_write));
        keep_alive_policy(session, &gw);

        // 0. The OAuth Protected Resource Metadata (RFC 9728), when auth is on.
        if let Some(answered) = auth::metadata(session, &gw).await? {
            return Ok(answered);
        }

        // 0b. A client of the 2025 era: the protocol bridge answers it whole, carrying its
        //     requests through this pipeline as 2026 requests (`journey::bridge`).
        if let Some(answered) = bridge::front(session, ctx).await? {
            return Ok(answered);
        }

        // 1. Admit: what the head alone decides.
        let admitted = match admission::admit(session.req_header(), &gw.config, &gw.key_headers) {
            Ok(a) => a,
            Err(rej) => return refuse(session, ctx, rej, None).await,
        };
        ctx.method = admitted.method;
        ctx.name = admitted.name;
        ctx.expects_continue = admitted.expects_continue;
        if admitted.doomed {
            invite_body(session, ctx).await?;
            if let Some(answered) = settle_doomed(session, ctx).await? {
                return Ok(answered);
            }
        }

        // 2-3. Route, authenticate and limit on the claims.
        if let Some(answered) = on_the_claims(session, ctx, &gw).await? {
            return Ok(answered);
        }
        let sample = ctx
            .route
            .and_then(|r| gw.table.get(r))
            .map_or(1.0, |r| r.sample);

        // 4. Only now is the body invited (`100 Continue`): limits ran on the headers alone.
        invite_body(session, ctx).await?;

        // 5. Read the body as its framing and leg allow (`inspect::Plan`): whole before any
        //    upstream is chosen, and checked (the default path, whatever its size and framing);
        //    held and checked chunk by chunk on pingora's pipe past 64 KiB; or, sampled out,
        //    streamed unchecked.
        if let Some(answered) = read_body(session, ctx, sample, admitted.content_length).await? {
            return Ok(answered);
        }

        // 5b. The pool's own credential (a secret, or a token from its token endpoint), now that
        //     the pool is final; the caller's token never goes to such a pool.
        if let Err(rej) = credentials::obtain(session, ctx, &gw).await {
            return refuse_with_id(session, ctx, rej).await;
        }

        // 6. A body in hand, for a plain HTTP/1.1 pool: forwarded here, on the direct leg.
        if direct::takes(session, ctx) {
            return direct::forward(session, ctx, &self.upstreams).await;
        }
        Ok(false)
    }

    /// Balance: pick an instance of the route's pool.
    async fn upstream_peer(
        &self,
        session: &mut Session,
        ctx: &mut RequestCtx,
    ) -> Result<Box<HttpPeer>> {
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
            Progress::Holding(_) => hold_chunk(session, body, end_of_stream, ctx),
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
        response::on_header(ctx, upstream_response)
    }

    fn response_body_filter(
        &self,
        _session: &mut Session,
        body: &mut Option<Bytes>,
        end_of_stream: bool,
        ctx: &mut RequestCtx,
    ) -> Result<Option<Duration>> {
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
        failure::connect_failed(ctx, e)
    }

    /// Answer a refusal found mid-body, or an upstream failure, with a JSON-RPC error body.
    async fn fail_to_proxy(
        &self,
        session: &mut Session,
        e: &Error,
        ctx: &mut RequestCtx,
    ) -> FailToProxy {
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
        observe::finish_request(ctx, status, session.body_bytes_sent(), headers);
    }
}

/// Step 5, reading the body as its framing and leg allow (`inspect::Plan`). `Some(answered)`:
/// the request is over (refused, or answered by the gateway itself).
async fn read_body(
    session: &mut Session,
    ctx: &mut RequestCtx,
    sample: f64,
    content_length: Option<usize>,
) -> Result<Option<bool>> {
    if !matches!(ctx.progress, Progress::Claimed) {
        return Ok(None);
    }
    let gw = ctx.gw.clone();
    // Auth decides on the claimed method and name: with it, every body is checked.
    let auth_check = gw.auth.as_ref().is_some_and(|a| a.needs_body_check());
    // A sealing pool reads every body: a retry's state is opened before any upstream.
    let sealing = gw.seals.get(ctx.pool).is_some_and(Option::is_some);
    let checked = auth_check || ctx.federated.is_some() || sealing || validate::sampled(sample);
    if !checked {
        gw.metrics.check_skipped();
    }
    let direct = direct::leg_for(session, ctx);
    let declared = inspect::declared_length(session, content_length);
    let plan = inspect::plan(checked, direct, declared, session.is_body_empty());
    if federation::needs_body_first(ctx, plan) {
        // Answered or renamed by the gateway: the body must be in hand first.
        let rej = too_large(inspect::PREREAD_MAX);
        return refuse_with_id(session, ctx, rej).await.map(Some);
    }
    read_before_upstream(session, ctx, plan, (checked, direct)).await
}

/// Steps 2 and 3, on what the headers claim, before the body: route, authenticate, limit.
/// `Some(answered)`: refused.
async fn on_the_claims(
    session: &mut Session,
    ctx: &mut RequestCtx,
    gw: &Gateway,
) -> Result<Option<bool>> {
    // 2. Route on the claims: by the route table, or on a federated endpoint by what the
    //    catalog says each pool serves (`federation::route`).
    let selected = select_route(gw, ctx, session.req_header().uri.path());
    let Some((route_ref, route)) = selected.and_then(|r| Some((r, gw.table.get(r)?))) else {
        let rej = route::no_route(ctx.method.as_deref(), ctx.name.as_deref());
        return refuse_with_id(session, ctx, rej).await.map(Some);
    };
    ctx.pool = route.pool;
    ctx.route = Some(route_ref);

    // 2b. Auth: who is calling, and may they call what the headers claim.
    if let Err(rej) = auth::admit(session, ctx, gw, route_ref).await {
        return refuse_with_id(session, ctx, rej).await.map(Some);
    }
    ctx.list_filter = auth::list_filter(gw, ctx.method.as_deref());

    // 3. Limit, on the same claims (a spoofed claim is caught by the check that follows), then
    //    take a concurrency slot of every limit covering the request, or shed it (503).
    let over = match limit::over_limit(gw, session, ctx, &route.name).await {
        Some(refused) => Some(refused),
        None => concurrency::take_slots(gw, ctx, &route.name).await,
    };
    if let Some((rej, retry_after)) = over {
        ctx.extra_headers.push(("retry-after", retry_after));
        return refuse_with_id(session, ctx, rej).await.map(Some);
    }
    Ok(None)
}
