//! The cache's steps in a request's journey, called by the proxy at three points:
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

use bytes::Bytes;
use pingora::http::ResponseHeader;
use pingora::proxy::Session;
use pingora::Result;
use std::sync::Arc;
use std::time::Instant;

use crate::mcp::caching::CACHEABLE;
use crate::mcp::methods::{TOOLS_CALL, TOOLS_LIST};
use crate::mcp::{codes, header};

use super::entry::{judge, Entry, Scope, Verdict};
use super::key::{self, Caller, Key};
use super::sse::NotificationScanner;
use super::{RouteCache, Shared};
use crate::gateway::stages::request::RequestCtx;

/// The response header that says where a response came from: `hit; age=<ms>`, `miss`, or
/// `stale; age=<ms>` (served because the refetch failed, `stale_if_error`).
pub const CACHE_HEADER: &str = "x-mcp-edge-cache";

pub use super::answer::serve_stale;
use super::answer::{check_params, framing, serve};

/// The request that fetches a key while identical ones wait; they wake when it is dropped.
pub struct Leader {
    pub(super) key: Key,
    pub(super) _tx: tokio::sync::watch::Sender<()>,
    pub(super) shared: Arc<Shared>,
}

impl Drop for Leader {
    fn drop(&mut self) {
        self.shared.finish(&self.key);
    }
}

/// A miss whose response may be stored or learned from.
struct Pending {
    method: &'static str,
    pool: Arc<str>,
    req: key::Request,
    caller: Option<Caller>,
    store: Option<Arc<RouteCache>>,
    generation: u64,
}

/// The cache's state of one request.
#[derive(Default)]
pub struct Flow {
    pending: Option<Pending>,
    pub(super) leader: Option<Leader>,
    body: Option<Vec<u8>>,
    headers: Vec<(http::HeaderName, http::HeaderValue)>,
    sse: Option<(NotificationScanner, Arc<str>, Arc<Shared>)>,
    /// An expired entry still within `stale_if_error`, served if the refetch fails.
    pub(super) stale: Option<Arc<Entry>>,
    /// Answered from the cache.
    pub hit: bool,
}

fn static_method(m: &str) -> Option<&'static str> {
    CACHEABLE.iter().copied().find(|c| *c == m)
}

/// Step 1 (see the module docs). `Some(true)`: the request was answered (a hit or an
/// `Mcp-Param-*` refusal); `None`: carry on to the upstream.
pub async fn on_checked(
    session: &mut Session,
    ctx: &mut RequestCtx,
    body: &[u8],
) -> Result<Option<bool>> {
    let method = match ctx.progress.envelope().and_then(|e| e.method.as_deref()) {
        Some(TOOLS_CALL) => return check_params(session, ctx, body).await,
        Some(m) => match static_method(m) {
            Some(m) => m,
            None => return Ok(None),
        },
        None => return Ok(None),
    };
    let gw = ctx.gw.clone();
    let shared = &gw.cache.shared;
    let pool: Arc<str> = gw.pools[ctx.pool].name.as_str().into();
    // A list that auth filters per caller is never served from, nor stored in, the shared
    // cache: a hit would skip the caller's filter (another caller's view, or the whole list).
    let store = ctx
        .route
        .and_then(|r| gw.cache.get(r))
        .filter(|_| ctx.list_filter.is_none());
    if store.is_none() && method != TOOLS_LIST {
        return Ok(None);
    }
    let headers = &session.req_header().headers;
    let version = headers
        .get(header::PROTOCOL_VERSION)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let Some(req) = key::of_request(&pool, method, version, body) else {
        return Ok(None);
    };
    let caller = key::caller_context(headers);
    let m = &shared.metrics;
    if let Some(s) = &store {
        if let Some(e) = fresh(s, &req.key, caller.as_ref()) {
            m.hits.with_label_values(&[method]).inc();
            return serve(session, ctx, &e, "hit").await.map(Some);
        }
        ctx.cache.stale = stale(s, &req.key, caller.as_ref(), s.cfg.stale_if_error);
        match shared.lead(req.key) {
            Ok(leader) => ctx.cache.leader = Some(leader),
            Err(mut rx) => {
                m.coalesced.with_label_values(&[method]).inc();
                // Another request is refetching: within stale_while_revalidate, answer with
                // the expired entry instead of waiting for it.
                if let Some(e) = stale(s, &req.key, caller.as_ref(), s.cfg.stale_while_revalidate) {
                    m.stale_served.with_label_values(&[method]).inc();
                    return serve(session, ctx, &e, "stale").await.map(Some);
                }
                let wait = gw.config.timeouts.connect + gw.config.timeouts.upstream_read;
                // Wakes when the leader finishes (stored or not), bounded by its own timeouts.
                let _ = tokio::time::timeout(wait, rx.changed()).await;
                if let Some(e) = fresh(s, &req.key, caller.as_ref()) {
                    m.hits.with_label_values(&[method]).inc();
                    return serve(session, ctx, &e, "hit").await.map(Some);
                }
                ctx.cache.stale = stale(s, &req.key, caller.as_ref(), s.cfg.stale_if_error);
            }
        }
        m.misses.with_label_values(&[method]).inc();
    }
    ctx.cache.pending = Some(Pending {
        method,
        pool,
        generation: store.as_ref().map_or(0, |s| s.generation()),
        req,
        caller,
        store,
    });
    Ok(None)
}

/// The entry for this key: the public one, or the caller's private one.
fn stored(s: &RouteCache, k: &Key, caller: Option<&Caller>) -> Option<Arc<Entry>> {
    let public = s.get(k).filter(|e| e.parsed.scope == Scope::Public);
    let private = || {
        let c = caller?;
        s.get(&k.private(c))
            .filter(|e| e.parsed.scope == Scope::Private)
    };
    public.or_else(private)
}

/// For `explain`: whether a checked request of `method` on `route` would be answered from the
/// edge cache now (`None`: the route caches nothing, or the method is not cacheable). Reads
/// only: no entry stored, no refetch led, no metric counted.
pub(crate) fn would_hit(
    gw: &crate::gateway::stages::state::Gateway,
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

fn fresh(s: &RouteCache, k: &Key, caller: Option<&Caller>) -> Option<Arc<Entry>> {
    stored(s, k, caller).filter(|e| e.is_fresh(Instant::now()))
}

/// An expired entry still within `window` past its ttl (`stale_if_error`,
/// `stale_while_revalidate`).
fn stale(
    s: &RouteCache,
    k: &Key,
    caller: Option<&Caller>,
    window: std::time::Duration,
) -> Option<Arc<Entry>> {
    if window.is_zero() {
        return None;
    }
    let now = Instant::now();
    stored(s, k, caller).filter(|e| !e.is_fresh(now) && e.age(now) < e.ttl() + window)
}

/// Step 2 (see the module docs).
pub fn on_response_header(ctx: &mut RequestCtx, resp: &mut ResponseHeader) -> Result<()> {
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
    let encoded = resp
        .headers
        .get(http::header::CONTENT_ENCODING)
        .is_some_and(|v| v.as_bytes() != b"identity");
    let why = if resp.status != 200 && resp.status != 400 {
        Some("status")
    } else if !crate::mcp::media::is_json(ct) {
        Some("not-json")
    } else if encoded {
        Some("encoded")
    } else if length.is_some_and(|l| l > limit) {
        Some("too-large")
    } else {
        None
    };
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

/// Step 3 (see the module docs). The chunk itself is never changed.
pub fn on_response_body(ctx: &mut RequestCtx, chunk: Option<&Bytes>, end: bool) {
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

/// A miss's whole response: learn, store, or drop the list's pages.
fn finish(
    shared: &Shared,
    p: Pending,
    body: Vec<u8>,
    headers: Vec<(http::HeaderName, http::HeaderValue)>,
) {
    let m = &shared.metrics;
    let verdict = judge(&body);
    if p.method == TOOLS_LIST && !matches!(verdict, Verdict::Error(_)) {
        shared.params.learn(&p.pool, &body);
    }
    let Some(store) = p.store else {
        return;
    };
    match verdict {
        Verdict::Error(c) if c == i64::from(codes::INVALID_PARAMS) && p.req.has_cursor => {
            // An invalid cursor: the list's pages may be out of date as a whole.
            let method = p.method;
            store.drop_if(move |e| e.method == method);
        }
        Verdict::Error(_) => {
            m.skipped.with_label_values(&[p.method, "error"]).inc();
        }
        Verdict::Skip(why) => m.skipped.with_label_values(&[p.method, why]).inc(),
        Verdict::Store(parsed) => {
            let key = match (parsed.scope, p.caller) {
                (Scope::Public, _) => p.req.key,
                (Scope::Private, Some(c)) => p.req.key.private(&c),
                (Scope::Private, None) => {
                    m.skipped
                        .with_label_values(&[p.method, "private-anonymous"])
                        .inc();
                    return;
                }
            };
            let weight = store.weight(
                body.len()
                    + headers
                        .iter()
                        .map(|(k, v)| k.as_str().len() + v.len())
                        .sum::<usize>(),
            );
            let e = Entry {
                body: Bytes::from(body),
                parsed,
                stored: Instant::now(),
                headers,
                pool: store.pool.clone(),
                method: p.method,
                uri: p.req.uri,
                weight,
            };
            if !store.put(key, e, p.generation) {
                m.skipped
                    .with_label_values(&[p.method, "invalidated"])
                    .inc();
            }
        }
    }
}
