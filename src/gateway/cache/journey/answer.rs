//! The cache's own answers: a hit (or a stale entry) written from a stored response, and the
//! refusal of a `tools/call` whose `Mcp-Param-*` headers do not match a known tool's arguments.

use bytes::Bytes;
use pingora::http::ResponseHeader;
use pingora::proxy::Session;
use pingora::Result;
use std::time::Instant;

use crate::gateway::cache::stages::entry::Entry;
use crate::gateway::cache::stages::flow::CACHE_HEADER;
use crate::gateway::journey::request::RequestCtx;
use crate::gateway::stages::answer::Verdict;

/// The `Mcp-Param-*` header check of a `tools/call`: a known tool's headers against its
/// arguments (a mismatch is refused, counted here).
pub(super) fn check_params(headers: &http::HeaderMap, ctx: &RequestCtx, body: &[u8]) -> Verdict {
    let shared = &ctx.gw.cache.shared;
    let pool = ctx.gw.pools[ctx.pool].name.as_str();
    // On a prefixed federated endpoint the pool knows the tool by its own name.
    let renamed = ctx.federated.as_ref().and_then(|f| f.rename.as_deref());
    let tool = renamed.or(ctx.progress.envelope().and_then(|e| e.name.as_deref()));
    let Some(params) = tool.and_then(|t| shared.params.get(pool, t)) else {
        return Verdict::Next;
    };
    match crate::gateway::cache::stages::params::check(headers, &params, body) {
        Ok(()) => Verdict::Next,
        Err(rej) => {
            shared.metrics.param_refusals.inc();
            Verdict::Refuse(rej)
        }
    }
}

/// The refetch failed (the upstream could not be reached, timed out, or broke off): answer
/// with the stale entry, if `stale_if_error` kept one. `true`: answered.
pub(crate) async fn serve_stale(
    session: &mut Session,
    ctx: &mut RequestCtx,
    e: &pingora::Error,
) -> bool {
    if ctx.answer.is_some() || crate::gateway::stages::answer::is_downstream(e) {
        return false;
    }
    let Some(entry) = ctx.cache.stale.take() else {
        return false;
    };
    let m = &ctx.gw.cache.shared.metrics;
    m.stale_served.with_label_values(&[entry.method]).inc();
    match serve(session, ctx, &entry, "stale").await {
        Ok(_) => true,
        Err(err) => {
            tracing::debug!("could not send the stale response: {err}");
            false
        }
    }
}

/// Write a hit: the stored headers and body with this request's id and the remaining ttl.
pub(super) async fn serve(
    session: &mut Session,
    ctx: &mut RequestCtx,
    e: &Entry,
    how: &str,
) -> Result<bool> {
    let now = Instant::now();
    let id = ctx
        .progress
        .envelope()
        .and_then(|env| env.id.as_ref())
        .map_or("null", |id| id.get());
    let body = e.render(id.as_bytes(), now);
    let age = e.age(now);
    let mut resp = ResponseHeader::build(200, Some(e.headers.len() + 4))?;
    for (k, v) in &e.headers {
        resp.append_header(k.clone(), v.clone())?;
    }
    resp.insert_header(http::header::CONTENT_LENGTH, body.len().to_string())?;
    resp.insert_header(http::header::AGE, age.as_secs().to_string())?;
    resp.insert_header(CACHE_HEADER, format!("{how}; age={}", age.as_millis()))?;
    ctx.cache.hit = true;
    ctx.cache.leader = None;
    session.write_response_header(Box::new(resp), false).await?;
    session
        .write_response_body(Some(Bytes::from(body)), true)
        .await?;
    Ok(true)
}

/// Framing headers a stored response does not keep (a hit sets its own length).
pub(super) fn framing(name: &http::HeaderName) -> bool {
    use http::header::*;
    [CONTENT_LENGTH, TRANSFER_ENCODING, CONNECTION, DATE, AGE].contains(name)
        || name.as_str() == "keep-alive"
        || name.as_str() == CACHE_HEADER
}
