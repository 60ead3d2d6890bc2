//! The cache's steps in a request's journey, called at three points:
//!
//! 1. [`on_checked`]: the body was read and passed the header↔body check (so a spoofed request
//!    never gets here). A `tools/call` of a known tool has its `Mcp-Param-*` headers checked
//!    against its arguments; a cacheable request is answered from a fresh entry, or waits for an
//!    identical request already in flight (coalescing), or goes on to the upstream as a miss.
//! 2. [`on_response_header`]: a miss's JSON response starts to be collected (bounded by
//!    `max_entry_bytes`); an SSE response gets a notification scanner.
//! 3. [`on_response_body`]: chunks pass on unchanged; at the end the collected response is
//!    stored if it is storable, `tools/list` teaches the tool parameters, and an invalid
//!    cursor drops the list's pages.
//!
//! The store, its keys and the rules for an entry are the stage's own, [`super::stages`].

mod answer;

use bytes::Bytes;
use pingora::http::ResponseHeader;
use pingora::proxy::Session;
use pingora::Result;
use std::sync::Arc;

use crate::mcp::header;
use crate::mcp::methods::{TOOLS_CALL, TOOLS_LIST};

use crate::gateway::cache::stages::flow::{
    finish, fresh, look_up, static_method, Pending, CACHE_HEADER,
};
use crate::gateway::cache::stages::key;
use crate::gateway::cache::stages::sse::NotificationScanner;
use crate::gateway::journey::request::RequestCtx;
use crate::gateway::stages::answer::Verdict;

pub(crate) use answer::serve_stale;
use answer::{check_params, framing, serve};

/// Step 1 (see the module docs): answered (a hit), refused (an `Mcp-Param-*` mismatch), or
/// on to the upstream.
pub(crate) async fn on_checked(
    session: &mut Session,
    ctx: &mut RequestCtx,
    body: &[u8],
) -> Result<Verdict> {
    let method = match ctx.progress.envelope().and_then(|e| e.method.as_deref()) {
        Some(TOOLS_CALL) => return Ok(check_params(&session.req_header().headers, ctx, body)),
        Some(m) => match static_method(m) {
            Some(m) => m,
            None => return Ok(Verdict::Next),
        },
        None => return Ok(Verdict::Next),
    };
    let gw = ctx.gw.clone();
    let shared = &gw.cache.shared;
    let pool: Arc<str> = gw.pools[ctx.pool].name.as_str().into();
    // A list that auth filters per caller is never served from, nor stored in, the shared
    // cache: a hit would skip the caller's filter (another caller's view, or the whole list).
    // Nor is a list read for pinned definitions: a hit would skip the pins' reading.
    let store = ctx
        .route
        .and_then(|r| gw.cache.get(r))
        .filter(|_| ctx.list_filter.is_none() && ctx.pin_list.is_none());
    if store.is_none() && method != TOOLS_LIST {
        return Ok(Verdict::Next);
    }
    let headers = &session.req_header().headers;
    let version = headers
        .get(header::PROTOCOL_VERSION)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let Some(req) = key::of_request(&pool, method, version, body) else {
        return Ok(Verdict::Next);
    };
    let caller = key::caller_context(headers);
    if let Some(s) = &store {
        let wait = gw.config.timeouts.connect + gw.config.timeouts.upstream_read;
        let found = look_up(
            &mut ctx.cache,
            shared,
            s,
            req.key,
            caller.as_ref(),
            method,
            wait,
        );
        if let Some((e, how)) = found.await {
            return serve(session, ctx, &e, how)
                .await
                .map(|_| Verdict::Answered);
        }
    }
    ctx.cache.pending = Some(Pending {
        method,
        pool,
        generation: store.as_ref().map_or(0, |s| s.generation()),
        req,
        caller,
        store,
    });
    Ok(Verdict::Next)
}

/// For `explain`: whether a checked request of `method` on `route` would be answered from the
/// edge cache now (`None`: the route caches nothing, or the method is not cacheable). Reads
/// only: no entry stored, no refetch led, no metric counted.
pub(crate) fn would_hit(
    gw: &crate::gateway::journey::state::Gateway,
    route: crate::gateway::stages::route::RouteRef,
    pool: usize,
    method: &str,
    headers: &http::HeaderMap,
    body: &[u8],
) -> Option<bool> {
    let method = static_method(method)?;
    let store = gw.cache.get(route)?;
    let version = headers
        .get(header::PROTOCOL_VERSION)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let req = key::of_request(&gw.pools[pool].name, method, version, body)?;
    let caller = key::caller_context(headers);
    Some(fresh(&store, &req.key, caller.as_ref()).is_some())
}

/// Step 2 (see the module docs).
pub(crate) fn on_response_header(ctx: &mut RequestCtx, resp: &mut ResponseHeader) -> Result<()> {
    let ct = resp
        .headers
        .get(http::header::CONTENT_TYPE)
        .map(|v| v.as_bytes())
        .unwrap_or_default();
    if crate::mcp::sse::is_event_stream(ct) {
        // An SSE answer is never stored; identical requests waiting for it fetch their own.
        if let Some(p) = ctx.cache.pending.take() {
            let m = &ctx.gw.cache.shared.metrics;
            m.skipped.with_label_values(&[p.method, "sse"]).inc();
        }
        ctx.cache.leader = None;
        let pool = ctx.gw.pools[ctx.pool].name.as_str().into();
        ctx.cache.sse = Some((
            NotificationScanner::default(),
            pool,
            ctx.gw.cache.shared.clone(),
        ));
        return Ok(());
    }
    let Some(p) = &ctx.cache.pending else {
        return Ok(());
    };
    let limit = p.store.as_ref().map_or(1 << 20, |s| s.cfg.max_entry_bytes) as usize;
    let length = resp
        .headers
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<usize>().ok());
    let why = not_storable(resp, ct, length, limit);
    if let Some(why) = why {
        let m = &ctx.gw.cache.shared.metrics;
        m.skipped.with_label_values(&[p.method, why]).inc();
        ctx.cache.pending = None;
        ctx.cache.leader = None;
        return Ok(());
    }
    ctx.cache.headers = resp
        .headers
        .iter()
        .filter(|(k, _)| !framing(k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    ctx.cache.body = Some(Vec::with_capacity(length.unwrap_or(4096).min(limit)));
    if p.store.is_some() {
        resp.insert_header(CACHE_HEADER, "miss")?;
    }
    Ok(())
}

/// Why a miss's response head already says it will not be stored (`None`: it may be).
fn not_storable(
    resp: &ResponseHeader,
    ct: &[u8],
    length: Option<usize>,
    limit: usize,
) -> Option<&'static str> {
    let encoded = resp
        .headers
        .get(http::header::CONTENT_ENCODING)
        .is_some_and(|v| v.as_bytes() != b"identity");
    if resp.status != 200 && resp.status != 400 {
        Some("status")
    } else if !crate::mcp::media::is_json(ct) {
        Some("not-json")
    } else if encoded {
        Some("encoded")
    } else if length.is_some_and(|l| l > limit) {
        Some("too-large")
    } else {
        None
    }
}

/// Step 3 (see the module docs). The chunk itself is never changed.
pub(crate) fn on_response_body(ctx: &mut RequestCtx, chunk: Option<&Bytes>, end: bool) {
    if let (Some((scan, pool, shared)), Some(c)) = (ctx.cache.sse.as_mut(), chunk) {
        let mut found = Vec::new();
        scan.feed(c, &mut found);
        for inv in &found {
            shared.invalidate(pool, inv);
            if matches!(inv, crate::mcp::caching::Invalidation::Lists(_)) {
                // A federated pool's catalog is fetched again at once.
                ctx.gw.catalogs.due_at(pool, std::time::Instant::now());
            }
        }
    }
    let Some(buf) = ctx.cache.body.as_mut() else {
        return;
    };
    if let Some(c) = chunk {
        buf.extend_from_slice(c);
    }
    let limit = ctx
        .cache
        .pending
        .as_ref()
        .and_then(|p| p.store.as_ref())
        .map_or(1 << 20, |s| s.cfg.max_entry_bytes) as usize;
    if buf.len() > limit {
        if let Some(p) = ctx.cache.pending.take() {
            let m = &ctx.gw.cache.shared.metrics;
            m.skipped.with_label_values(&[p.method, "too-large"]).inc();
        }
        ctx.cache.body = None;
        ctx.cache.leader = None;
        return;
    }
    if end {
        let body = ctx.cache.body.take().unwrap_or_default();
        if let Some(p) = ctx.cache.pending.take() {
            let headers = std::mem::take(&mut ctx.cache.headers);
            finish(&ctx.gw.cache.shared, p, body, headers);
        }
        // Identical requests waiting for this one look again now.
        ctx.cache.leader = None;
    }
}
