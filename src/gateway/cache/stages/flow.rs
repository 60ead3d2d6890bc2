//! The cache's state of one request ([`Flow`]: the miss being collected, the fetch it leads,
//! the stale entry kept in reserve) and the rules the journey's cache steps apply to it: which
//! stored entry answers a key (`fresh`, `stale`) and what a miss's whole response becomes
//! (`finish`: stored, learned from, or the list's pages dropped). The steps themselves, which
//! read and write the request's context, are `cache::journey`.

use bytes::Bytes;
use std::sync::Arc;
use std::time::Instant;

use crate::mcp::caching::CACHEABLE;
use crate::mcp::codes;
use crate::mcp::methods::TOOLS_LIST;

use super::entry::{judge, Entry, Judgement, Scope};
use super::key::{self, Caller, Key};
use super::sse::NotificationScanner;
use super::{RouteCache, Shared};

/// The response header that says where a response came from: `hit; age=<ms>`, `miss`, or
/// `stale; age=<ms>` (served because the refetch failed, `stale_if_error`).
pub(crate) const CACHE_HEADER: &str = "x-mcp-edge-cache";

/// The request that fetches a key while identical ones wait; they wake when it is dropped.
pub(crate) struct Leader {
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
pub(crate) struct Pending {
    pub(crate) method: &'static str,
    pub(crate) pool: Arc<str>,
    pub(crate) req: key::Request,
    pub(crate) caller: Option<Caller>,
    pub(crate) store: Option<Arc<RouteCache>>,
    pub(crate) generation: u64,
}

/// The cache's state of one request.
#[derive(Default)]
pub struct Flow {
    pub(crate) pending: Option<Pending>,
    pub(crate) leader: Option<Leader>,
    pub(crate) body: Option<Vec<u8>>,
    pub(crate) headers: Vec<(http::HeaderName, http::HeaderValue)>,
    pub(crate) sse: Option<(NotificationScanner, Arc<str>, Arc<Shared>)>,
    /// An expired entry still within `stale_if_error`, served if the refetch fails.
    pub(crate) stale: Option<Arc<Entry>>,
    /// Answered from the cache.
    pub hit: bool,
}

/// The method as the cache knows it, when it is one it caches.
pub(crate) fn static_method(m: &str) -> Option<&'static str> {
    CACHEABLE.iter().copied().find(|c| *c == m)
}

/// A cacheable request's key in its route's store: a fresh entry (`"hit"`), an expired one
/// within `stale_while_revalidate` while another request refetches it (`"stale"`), or a miss
/// (`None`), which leads the refetch or waits up to `wait` for the one in flight, and keeps an
/// entry within `stale_if_error` in reserve. Counted in the cache's metrics.
pub(crate) async fn look_up(
    flow: &mut Flow,
    shared: &Arc<Shared>,
    s: &RouteCache,
    k: Key,
    caller: Option<&Caller>,
    method: &'static str,
    wait: std::time::Duration,
) -> Option<(Arc<Entry>, &'static str)> {
    let m = &shared.metrics;
    if let Some(e) = fresh(s, &k, caller) {
        m.hits.with_label_values(&[method]).inc();
        return Some((e, "hit"));
    }
    flow.stale = stale(s, &k, caller, s.cfg.stale_if_error);
    match shared.lead(k) {
        Ok(leader) => flow.leader = Some(leader),
        Err(mut rx) => {
            m.coalesced.with_label_values(&[method]).inc();
            // Another request is refetching: within stale_while_revalidate, answer with the
            // expired entry instead of waiting for it.
            if let Some(e) = stale(s, &k, caller, s.cfg.stale_while_revalidate) {
                m.stale_served.with_label_values(&[method]).inc();
                return Some((e, "stale"));
            }
            // Wakes when the leader finishes (stored or not), bounded by its own timeouts.
            let _ = tokio::time::timeout(wait, rx.changed()).await;
            if let Some(e) = fresh(s, &k, caller) {
                m.hits.with_label_values(&[method]).inc();
                return Some((e, "hit"));
            }
            flow.stale = stale(s, &k, caller, s.cfg.stale_if_error);
        }
    }
    m.misses.with_label_values(&[method]).inc();
    None
}

/// The entry for this key: the public one, or the caller's private one.
pub(crate) fn stored(s: &RouteCache, k: &Key, caller: Option<&Caller>) -> Option<Arc<Entry>> {
    let public = s.get(k).filter(|e| e.parsed.scope == Scope::Public);
    let private = || {
        let c = caller?;
        s.get(&k.private(c))
            .filter(|e| e.parsed.scope == Scope::Private)
    };
    public.or_else(private)
}

/// A fresh entry for this key.
pub(crate) fn fresh(s: &RouteCache, k: &Key, caller: Option<&Caller>) -> Option<Arc<Entry>> {
    stored(s, k, caller).filter(|e| e.is_fresh(Instant::now()))
}

/// An expired entry still within `window` past its ttl (`stale_if_error`,
/// `stale_while_revalidate`).
pub(crate) fn stale(
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

/// A miss's whole response: learn, store, or drop the list's pages.
pub(crate) fn finish(
    shared: &Shared,
    p: Pending,
    body: Vec<u8>,
    headers: Vec<(http::HeaderName, http::HeaderValue)>,
) {
    let m = &shared.metrics;
    let verdict = judge(&body);
    if p.method == TOOLS_LIST && !matches!(verdict, Judgement::Error(_)) {
        shared.params.learn(&p.pool, &body);
    }
    let Some(store) = p.store else {
        return;
    };
    match verdict {
        Judgement::Error(c) if c == i64::from(codes::INVALID_PARAMS) && p.req.has_cursor => {
            // An invalid cursor: the list's pages may be out of date as a whole.
            let method = p.method;
            store.drop_if(move |e| e.method == method);
        }
        Judgement::Error(_) => {
            m.skipped.with_label_values(&[p.method, "error"]).inc();
        }
        Judgement::Skip(why) => m.skipped.with_label_values(&[p.method, why]).inc(),
        Judgement::Store(parsed) => {
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
