//! Response stage: what the gateway does to an upstream's response on its way to the client,
//! the same whichever leg carried it (pingora's proxy pipe, through `response_filter` and
//! `response_body_filter`, or the direct leg, [`crate::gateway::journey::direct`]).
//!
//! On the head: the instance's latency (and the outlier detector's count), the header naming
//! the instance, passive health, the scanner that watches a JSON or SSE result for its MRTR
//! flow, the caller's list filter, the pins' list reader and the edge cache. On each body
//! chunk: the list filter and the pins' list reader (which may hold and rewrite the body),
//! the scanner and the cache.

use bytes::Bytes;
use pingora::http::ResponseHeader;
use pingora::Result;

use crate::mcp::methods::name_field;
use crate::mcp::result_scan::ResultScanner;

use crate::gateway::cache::journey as cache;
use crate::gateway::journey::{auth, pins, seal};

use crate::gateway::journey::request::RequestCtx;

/// The response head, before it is written to the client.
pub(crate) fn on_header(
    ctx: &mut RequestCtx,
    upstream_response: &mut ResponseHeader,
) -> Result<()> {
    let gw = ctx.gw.clone();
    if let Some(idx) = ctx.instance {
        let pool = &gw.pools[ctx.pool];
        if let Some(since) = ctx.upstream_since {
            let took = since.elapsed();
            gw.upstream_metrics(ctx.pool, idx)
                .duration
                .observe(took.as_secs_f64());
            // The balancer's view: a stream that stays open costs its instance nothing more.
            if ctx
                .method
                .as_deref()
                .is_some_and(crate::mcp::methods::holds_open)
            {
                ctx.release_load();
            } else {
                let now = crate::gateway::balance::stages::load::now_ns();
                pool.loads[idx].observe(took, now, pool.decay);
                // The outlier detector counts the answer, and judges the pool at a window's end.
                let ejected = pool.outlier_sample(idx, now);
                if !ejected.is_empty() {
                    gw.note_outliers(ctx.pool, &ejected);
                }
            }
        }
        // The gateway names the instance and where a retry leg landed: no spelling of these
        // names from the upstream stays.
        let own = &gw.response_asserted;
        for shadow in crate::mcp::header::shadows_of(&upstream_response.headers, own) {
            upstream_response.remove_header(&shadow);
        }
        if let Some(name) = &gw.upstream_header {
            let value = pool.instances[idx].header_value.clone();
            upstream_response.insert_header(name.clone(), value)?;
        }
        if let Some(l) = ctx.landing {
            let name = crate::mcp::header::RETRY_LANDING;
            upstream_response.insert_header(name, l.header_value())?;
        }
        let status = upstream_response.status.as_u16();
        gw.note_health(ctx.pool, idx, pool.health.on_response(idx, status));
        // The pool's concurrency limit learns from the latency up to this head.
        if let Some(permit) = ctx.slots.as_mut().and_then(|s| s.1.as_mut()) {
            permit.answered(status);
        }
    }
    let content_type = upstream_response.headers.get(http::header::CONTENT_TYPE);
    let ct = content_type.map_or(&b""[..], |v| v.as_bytes());
    if name_field(ctx.method.as_deref().unwrap_or("")).is_some() {
        // With flows and tracing off, only the input_required metric needs the body.
        let follow = gw.flows.is_some() || gw.tracing.is_some() || gw.audit.is_some();
        ctx.scanner = ResultScanner::for_response(ct, follow);
    }
    if let (Some(pass), Some(idx)) = (&ctx.pass, ctx.instance) {
        // A passed-through 2025-era session: the instance's session id, sealed with it.
        let pool = &gw.pools[ctx.pool];
        let at = (pool.name.as_str(), pool.instances[idx].name.as_str());
        let sealer = &gw.bridge.sealer;
        crate::gateway::stages::bridge::pass::answer_head(pass, sealer, at, upstream_response)?;
    }
    auth::on_response_header(ctx, upstream_response);
    pins::on_response_header(ctx, upstream_response);
    seal::on_response_header(ctx, upstream_response);
    // The edge cache: collect a cacheable response, watch streams for invalidations.
    cache::on_response_header(ctx, upstream_response)
}

/// One chunk of the response body (`None` at the end, or when the list filter holds it).
pub(crate) fn on_body(ctx: &mut RequestCtx, body: &mut Option<Bytes>, end_of_stream: bool) {
    auth::on_response_body(ctx, body, end_of_stream);
    pins::on_response_body(ctx, body, end_of_stream);
    // Before the scanner: the flow is followed by the state the client sees.
    seal::on_response_body(ctx, body, end_of_stream);
    if let (Some(scanner), Some(chunk)) = (ctx.scanner.as_mut(), body.as_ref()) {
        scanner.feed(chunk);
    }
    cache::on_response_body(ctx, body.as_ref(), end_of_stream);
}

/// A piece of an upstream's response body (`None`: the body had ended, or ends now) through
/// [`on_body`], and whether the body ends with it: for a stream handed over outside the
/// pipeline ([`super::detached`]), which has no pingora session to call the
/// `response_body_filter` phase with (in the pipeline the direct leg calls the phase).
pub(crate) fn through_stage(
    ctx: &mut RequestCtx,
    up: &crate::gateway::transport::upstream_h1::H1Session,
    mut chunk: Option<Bytes>,
) -> (Option<Bytes>, bool) {
    use pingora::protocols::http::custom::client::Session as _;
    let end = chunk.is_none() || up.response_finished();
    on_body(ctx, &mut chunk, end);
    (chunk, end)
}
