//! The gateway: a pingora [`ProxyHttp`] whose phases are a request's journey, top to bottom
//! (told in prose, with the reasons, in docs/architecture.md, "How a request travels").
//!
//! | pingora phase             | stage (file)                                                  |
//! |---------------------------|---------------------------------------------------------------|
//! | (below pingora)           | the whole HTTP/1 request head under a deadline ([`head_deadline`]), before pingora has parsed it |
//! | `request_filter`          | **admit** the head ([`admission`]); **route** ([`route`]; on a federated endpoint by the pools' catalogs, [`federation`]); **authenticate** (`auth_stage`, [`crate::auth`]); **limit** ([`limit`], [`concurrency`]) on the claimed `Mcp-Method`/`Mcp-Name`; then the body is **inspected and validated** (every body on the direct leg, up to 64 KiB on pingora's pipe) ([`inspect`], [`validate`]) and may be answered by **federation** (a merged list, `server/discover`, one listen stream; a prefixed name put back) or from the **cache** ([`cache`]) before any upstream is chosen; a body in hand for a plain HTTP/1.1 pool is then **forwarded** there and its response written, on the **direct** leg ([`direct`]: the stages below as plain functions, without pingora's proxy pipe) |
//! | `upstream_peer`           | **balance**: pick an instance of the route's pool ([`balance`], [`health`]; TLS peers [`upstream_tls`]); a plain HTTP/1.1 peer goes on the gateway's own upstream leg ([`upstream_h1`]: head and body in one write, its own pool) |
//! | `upstream_request_filter` | **forward**: hop-by-hop header policy ([`forward`]), auth header edits, the pool's credential (`credentials_stage`, [`crate::credentials`], obtained at the end of `request_filter`), trace context ([`trace`]); body unchanged |
//! | `request_body_filter`     | pingora's pipe past 64 KiB: **inspect** and **validate** chunk by chunk (held, then released whole); a trailer section refused |
//! | `response_filter`/`_body` | name the instance, passive health, per-caller list filter, cache store, flow scanning ([`response`]) |
//! | `fail_to_connect`/`_proxy` | **answer** a refusal or an upstream failure ([`failure`], [`answer`]); connect retries; stale-if-error |
//! | `logging`                 | **observe**: flows and spans ([`follow`], [`flows`]), metrics and one access-log line ([`observe`], [`labels`]) |
//!
//! The session-facing steps these phases share (refusing, reading a small body before choosing
//! an upstream, holding a large one) are in `steps`. A request's state is one [`RequestCtx`]
//! ([`request`]); where its body is, is one [`request::Progress`]. The rules a request runs
//! under are one [`Gateway`] ([`state`]), rebuilt on reload by [`server`] (listeners and TLS:
//! [`listeners`], [`tls`]; re-resolution: [`dns`]); [`admin`] serves `/metrics`, `/healthz`,
//! `/readyz`, `POST /-/reload` and `POST /-/cache/purge`.
//!
//! **Where the body is checked.** The check needs the whole body, and the body must reach the
//! upstream byte for byte. On the default path (a plain HTTP/1.1 pool, the direct leg) the body
//! is read whole in `request_filter`, whatever its size and framing (a `Content-Length`,
//! chunked, h2 DATA frames), checked, and sent by the direct leg from the bytes in hand: a
//! refused request never reaches an upstream, not even its head. pingora's pipe (TLS and h2
//! pools) replays a body read before the upstream is chosen only from its retry buffer, which
//! stops at 64 KiB: there bodies up to 64 KiB are read and checked first, and larger ones are
//! routed on the claimed headers and held chunk by chunk in `request_body_filter`, checked at the
//! end, then released in one piece, or cut off before they are complete. `inspect::Plan` is
//! the one table of these paths. Requests the headers alone doom (missing or malformed MCP
//! headers, a version older than 2026-07-28) are answered in `request_filter` without an
//! upstream. When sampling skips the check, the body is forwarded unchecked.

pub mod admin;
pub mod admission;
pub mod answer;
mod auth_stage;
pub mod balance;
pub mod cache;
pub mod client_hello;
pub mod concurrency;
pub mod console;
mod credentials_stage;
pub mod detached;
pub mod direct;
pub mod dns;
pub mod expiring;
pub mod explain;
pub mod failure;
pub mod federation;
pub mod flow_metrics;
pub mod flows;
pub mod follow;
pub mod forward;
pub mod h2_to_h1;
pub mod head_deadline;
pub mod health;
pub mod inspect;
pub mod labels;
pub mod limit;
pub mod listeners;
pub mod observe;
pub mod parked;
pub mod recent;
pub mod request;
pub mod response;
pub mod route;
pub mod route_index;
pub mod server;
pub mod state;
mod steps;
pub mod task_count;
pub mod tls;
pub mod trace;
pub mod upstream_h1;
pub mod upstream_tls;
pub mod validate;

use async_trait::async_trait;
use bytes::Bytes;
use pingora::http::ResponseHeader;
use pingora::prelude::*;
use pingora::proxy::{FailToProxy, ProxyHttp, Session};
use pingora::upstreams::peer::HttpPeer;
use std::sync::Arc;
use std::time::Duration;

use answer::too_large;
use request::Progress;
pub use request::RequestCtx;
pub use server::{build_server, serve, Live, RunningGateway};
pub use state::Gateway;
use steps::{
    cut_off, hold_chunk, invite_body, keep_alive_policy, read_before_upstream, refuse,
    refuse_with_id, settle_doomed,
};

/// The pingora service.
pub struct Proxy {
    live: Arc<Live>,
    /// Idle connections to plain HTTP/1.1 instances (the direct leg's and the own leg's).
    upstreams: Arc<upstream_h1::Pool>,
}

impl Proxy {
    pub fn new(live: Arc<Live>, upstreams: Arc<upstream_h1::Pool>) -> Self {
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
        if let Some(answered) = auth_stage::metadata(session, &gw).await? {
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

        // 2. Route on the claims: by the route table, or on a federated endpoint by what the
        //    catalog says each pool serves (`federation::route`).
        let selected = select_route(&gw, ctx, session.req_header().uri.path());
        let Some((route_ref, route)) = selected.and_then(|r| Some((r, gw.table.get(r)?))) else {
            let rej = route::no_route(ctx.method.as_deref(), ctx.name.as_deref());
            return refuse_with_id(session, ctx, rej).await;
        };
        ctx.pool = route.pool;
        ctx.route = Some(route_ref);

        // 2b. Auth: who is calling, and may they call what the headers claim.
        if let Some(answered) = auth_stage::admit(session, ctx, &gw, route_ref).await? {
            return Ok(answered);
        }
        ctx.list_filter = auth_stage::wants_list_filter(&gw, ctx.method.as_deref());

        // 3. Limit, on the same claims (a spoofed claim is caught by the check that follows), then
        //    take a concurrency slot of every limit covering the request, or shed it (503).
        let over = match limit::over_limit(&gw, session, ctx, &route.name).await {
            Some(refused) => Some(refused),
            None => concurrency::take_slots(&gw, ctx, &route.name).await,
        };
        if let Some((rej, retry_after)) = over {
            ctx.extra_headers.push(("retry-after", retry_after));
            return refuse_with_id(session, ctx, rej).await;
        }

        // 4. Only now is the body invited (`100 Continue`): limits ran on the headers alone.
        invite_body(session, ctx).await?;

        // 5. Read the body as its framing and leg allow (`inspect::Plan`): whole before any
        //    upstream is chosen, and checked (the default path, whatever its size and framing);
        //    held and checked chunk by chunk on pingora's pipe past 64 KiB; or, sampled out,
        //    streamed unchecked.
        if matches!(ctx.progress, Progress::Claimed) {
            // Auth decides on the claimed method and name: with it, every body is checked.
            let auth_check = gw.auth.as_ref().is_some_and(|a| a.needs_body_check());
            let checked = auth_check || ctx.federated.is_some() || validate::sampled(route.sample);
            if !checked {
                gw.metrics.check_skipped();
            }
            let direct = direct::leg_for(session, ctx);
            let declared = inspect::declared_length(session, admitted.content_length);
            let plan = inspect::plan(checked, direct, declared, session.is_body_empty());
            if federation::needs_body_first(ctx, plan) {
                // Answered or renamed by the gateway: the body must be in hand first.
                let rej = too_large(inspect::PREREAD_MAX);
                return refuse_with_id(session, ctx, rej).await;
            }
            let how = (checked, direct);
            if let Some(answered) = read_before_upstream(session, ctx, plan, how).await? {
                return Ok(answered);
            }
        }

        // 5b. The pool's own credential (a secret, or a token from its token endpoint), now that
        //     the pool is final; the caller's token never goes to such a pool.
        if let Some(answered) = credentials_stage::obtain(session, ctx, &gw).await? {
            return Ok(answered);
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
        let gw = ctx.gw.clone();
        let headers = &session.req_header().headers;
        let mut peer = forward::choose(headers, ctx)?;
        if gw.peers[ctx.pool].is_plain_h1()
            && gw.config.connections.upstream_leg != crate::config::UpstreamLeg::Pingora
            && upstream_h1::takes(&ctx.progress, headers)
        {
            upstream_h1::use_for(&mut peer);
        }
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
        finish_request(ctx, status, session.body_bytes_sent(), headers);
    }
}

/// The route a request takes on its claims (`None`: no route, no default).
pub(crate) fn select_route(
    gw: &Gateway,
    ctx: &mut RequestCtx,
    path: &str,
) -> Option<route::RouteRef> {
    let (method, name) = (ctx.method.as_deref(), ctx.name.as_deref());
    let Some((fed, e)) = gw
        .federation
        .as_ref()
        .and_then(|f| Some((f, f.endpoint_of(path)?)))
    else {
        return gw.table.select_ref(method, name);
    };
    let decision = federation::route(gw, fed, e, method, name);
    Some(federation::enter(ctx, e, decision))
}

/// A request's end: its instance released, its flow and span closed, and it counted and
/// logged (pingora's `logging` phase, or the end of a stream that left the pipeline).
pub(crate) fn finish_request(
    ctx: &mut RequestCtx,
    status: u16,
    body_bytes_sent: usize,
    headers: &http::HeaderMap,
) {
    ctx.release_instance();
    // Flows and spans: the leg's round, its flow's end, its span (nothing when both are off).
    if ctx.trace.is_none() {
        if let Some(tracing) = &ctx.gw.tracing {
            // Answered before any upstream: the ids are chosen now.
            let ratio = tracing.config.sample_ratio;
            ctx.trace = Some(trace::begin_request(
                headers,
                ctx.progress.envelope(),
                ratio,
            ));
        }
    }
    let outcome = observe::Outcome::of(ctx, status, body_bytes_sent);
    ctx.gw.metrics.record(&outcome);
    ctx.gw.metrics.recent.note(
        &outcome,
        || ctx.answer.as_ref().map(|(r, _)| r.message.to_string()),
        || match ctx.progress.envelope() {
            Some(e) => (e.method.clone(), e.name.clone()),
            // Refused by the check: the body is still in hand (read again only on this path).
            None => crate::mcp::envelope::parse(&ctx.in_hand)
                .map_or((None, None), |e| (e.method, e.name)),
        },
        || ctx.identity.as_ref().map(|i| i.subject.clone()),
    );
    observe::access_log(&outcome);
    follow::finished(ctx, status, outcome);
    ctx.slots = None;
}
