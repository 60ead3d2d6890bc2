//! The edge cache's stage (the component is described in [`super`]):
//!
//! - [`key`]: what of a request decides its result; [`entry`]: one stored response, and how a
//!   hit is rendered from it; [`sse`]: invalidating notifications spotted on proxied streams;
//!   [`flow`]: one request's cache state and the rules for a lookup and a miss's response
//!   (the steps that apply them to a request, and write a hit, are [`super::journey`]);
//!   [`params`]: the `x-mcp-header` parameters learned and the `Mcp-Param-*` check.
//! - Each route has its own store ([`RouteCache`]); a reload keeps or drops it ([`CacheSet`]).
//! - What outlives every reload is [`Shared`]: metrics, requests in flight per key (for
//!   coalescing), per-pool generations, the learned tool parameters, and every live store.

pub(crate) mod entry;
pub(crate) mod flow;
pub(crate) mod key;
pub(crate) mod params;
pub(crate) mod sse;

use moka::notification::RemovalCause;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use crate::config::{CacheConfig, Config};
use crate::mcp::caching::Invalidation;
use crate::mcp::methods::RESOURCES_READ;
use crate::mcp::query::decode_component;

pub(crate) use crate::gateway::cache::telemetry::CacheMetrics;
use crate::gateway::stages::route::{RouteRef, RouteTable};
pub(crate) use entry::Entry;
pub(crate) use flow::Flow;
pub(crate) use key::Key;

/// Fixed overhead charged per entry besides its body (headers, key, bookkeeping).
const ENTRY_OVERHEAD: usize = 256;

/// One route's store.
pub(crate) struct RouteCache {
    pub cfg: CacheConfig,
    pub pool: Arc<str>,
    store: moka::sync::Cache<Key, Arc<Entry>>,
    bytes: Arc<AtomicU64>,
    generation: Arc<AtomicU64>,
    metrics: Arc<CacheMetrics>,
}

struct Expiry {
    stale: Duration,
}

impl moka::Expiry<Key, Arc<Entry>> for Expiry {
    fn expire_after_create(&self, _: &Key, e: &Arc<Entry>, _: Instant) -> Option<Duration> {
        Some(e.ttl() + self.stale)
    }
    fn expire_after_update(
        &self,
        _: &Key,
        e: &Arc<Entry>,
        _: Instant,
        _: Option<Duration>,
    ) -> Option<Duration> {
        Some(e.ttl() + self.stale)
    }
}

impl RouteCache {
    fn new(cfg: CacheConfig, pool: Arc<str>, shared: &Shared) -> RouteCache {
        let bytes = Arc::new(AtomicU64::new(0));
        let metrics = shared.metrics.clone();
        let (b, m) = (bytes.clone(), metrics.clone());
        let store = moka::sync::Cache::builder()
            .max_capacity(cfg.max_bytes)
            .weigher(|_, e: &Arc<Entry>| e.weight)
            .expire_after(Expiry {
                stale: cfg.stale_if_error.max(cfg.stale_while_revalidate),
            })
            .support_invalidation_closures()
            .eviction_listener(move |_, e: Arc<Entry>, cause| {
                b.fetch_sub(u64::from(e.weight), Ordering::Relaxed);
                m.bytes.sub(i64::from(e.weight));
                m.entries.dec();
                if matches!(cause, RemovalCause::Size | RemovalCause::Expired) {
                    m.evictions.with_label_values(&[e.method]).inc();
                }
            })
            .build();
        RouteCache {
            cfg,
            generation: shared.generation(&pool),
            pool,
            store,
            bytes,
            metrics,
        }
    }

    /// The weight of an entry of `len` body bytes: its size, but at least
    /// `max_bytes / max_entries`, so one bound on the total weight keeps both limits.
    pub(crate) fn weight(&self, len: usize) -> u32 {
        let floor = self.cfg.max_bytes / self.cfg.max_entries;
        (len as u64 + ENTRY_OVERHEAD as u64)
            .max(floor)
            .min(u64::from(u32::MAX)) as u32
    }

    pub(crate) fn get(&self, key: &Key) -> Option<Arc<Entry>> {
        self.store.get(key)
    }

    /// This pool's generation (bumped by every invalidation).
    pub(crate) fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Store an entry fetched when the pool's generation was `generation`; an invalidation
    /// since then makes it unstorable (it may predate the change).
    pub(crate) fn put(&self, key: Key, e: Entry, generation: u64) -> bool {
        if self.generation() != generation {
            return false;
        }
        let w = u64::from(e.weight);
        let method = e.method;
        self.bytes.fetch_add(w, Ordering::Relaxed);
        self.metrics.bytes.add(w as i64);
        self.metrics.entries.inc();
        self.store.insert(key, Arc::new(e));
        self.metrics.stores.with_label_values(&[method]).inc();
        if self.bytes.load(Ordering::Relaxed) > self.cfg.max_bytes {
            // Evict now rather than on moka's schedule: the byte bound holds after every store.
            self.store.run_pending_tasks();
        }
        true
    }

    #[cfg(test)]
    /// Bytes charged to this store now.
    pub(crate) fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }

    /// Drop the entries of `pool` that `pred` picks.
    fn drop_if(&self, pred: impl Fn(&Entry) -> bool + Send + Sync + 'static) {
        // Fails only when invalidation closures are off, and they are on.
        let _ = self.store.invalidate_entries_if(move |_, e| pred(e));
        self.store.run_pending_tasks();
    }
}

/// What outlives reloads.
pub struct Shared {
    pub metrics: Arc<CacheMetrics>,
    inflight: Mutex<HashMap<Key, tokio::sync::watch::Receiver<()>>>,
    generations: Mutex<HashMap<Arc<str>, Arc<AtomicU64>>>,
    pub params: params::ParamBook,
    stores: Mutex<Vec<Weak<RouteCache>>>,
}

impl Shared {
    fn new(registry: &prometheus::Registry) -> prometheus::Result<Shared> {
        Ok(Shared {
            metrics: Arc::new(CacheMetrics::new(registry)?),
            inflight: Mutex::default(),
            generations: Mutex::default(),
            params: params::ParamBook::default(),
            stores: Mutex::default(),
        })
    }

    fn generation(&self, pool: &Arc<str>) -> Arc<AtomicU64> {
        let mut g = self.generations.lock().unwrap_or_else(|e| e.into_inner());
        g.entry(pool.clone()).or_default().clone()
    }

    fn live_stores(&self) -> Vec<Arc<RouteCache>> {
        let mut s = self.stores.lock().unwrap_or_else(|e| e.into_inner());
        s.retain(|w| w.strong_count() > 0);
        s.iter().filter_map(Weak::upgrade).collect()
    }

    /// Apply an invalidation seen on a stream of `pool`, to every store of that pool.
    pub(crate) fn invalidate(&self, pool: &str, inv: &Invalidation) {
        self.generation(&pool.into()).fetch_add(1, Ordering::AcqRel);
        self.metrics.invalidations.inc();
        for s in self.live_stores().into_iter().filter(|s| &*s.pool == pool) {
            match inv.clone() {
                Invalidation::Lists(methods) => s.drop_if(move |e| methods.contains(&e.method)),
                Invalidation::Resource(uri) => s.drop_if(move |e| {
                    e.method == RESOURCES_READ && e.uri.as_deref() == Some(uri.as_str())
                }),
            }
        }
    }

    /// Drop the entries of `method` (all methods when `None`), and for `resources/read` of
    /// `name` (a uri) only. Returns how many stores were purged.
    pub(crate) fn purge(&self, method: Option<String>, name: Option<String>) -> usize {
        let stores = self.live_stores();
        for s in &stores {
            s.generation.fetch_add(1, Ordering::AcqRel);
            let (m, n) = (method.clone(), name.clone());
            s.drop_if(move |e| {
                m.as_deref().is_none_or(|m| m == e.method)
                    && n.as_deref().is_none_or(|n| e.uri.as_deref() == Some(n))
            });
        }
        stores.len()
    }

    /// Become the one request that fetches `key` (`Ok`), or get a receiver that wakes when the
    /// request already fetching it finishes (`Err`).
    pub(crate) fn lead(
        self: &Arc<Self>,
        key: Key,
    ) -> Result<flow::Leader, tokio::sync::watch::Receiver<()>> {
        let mut inflight = self.inflight.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(rx) = inflight.get(&key) {
            return Err(rx.clone());
        }
        let (tx, rx) = tokio::sync::watch::channel(());
        inflight.insert(key, rx);
        Ok(flow::Leader {
            key,
            _tx: tx,
            shared: self.clone(),
        })
    }

    fn finish(&self, key: &Key) {
        let mut inflight = self.inflight.lock().unwrap_or_else(|e| e.into_inner());
        inflight.remove(key);
    }
}

/// `POST /-/cache/purge[?method=M][&name=N]` on the admin listener: drop every entry, those of
/// one method, or (with `name`) the `resources/read` of one uri. Keys and values are
/// percent-decoded ([`crate::mcp::query::decode_component`]). Pairs split on `&` only: this
/// endpoint is its own and only reader, so a `;` stays part of a uri.
pub(crate) fn purge_endpoint(cache: &CacheSet, query: Option<&str>) -> (u16, String) {
    let (mut method, mut name) = (None, None);
    for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        let decoded = decode_component(k).zip(decode_component(v));
        let Some((k, v)) = decoded else {
            return (
                400,
                format!("purge: {pair:?} is not valid percent-encoded UTF-8\n"),
            );
        };
        match k.as_str() {
            "method" if crate::mcp::caching::is_cacheable(&v) => method = Some(v),
            "method" => {
                let known = crate::mcp::caching::CACHEABLE.join(", ");
                return (
                    400,
                    format!("purge: method {v:?} is never cached; use one of {known}\n"),
                );
            }
            "name" => name = Some(v),
            other => {
                return (
                    400,
                    format!("purge: unknown parameter {other:?}; use method= and name=\n"),
                )
            }
        }
    }
    if name.is_some() && method.as_deref().is_some_and(|m| m != RESOURCES_READ) {
        return (400, "purge: name= selects a resources/read uri; use it with method=resources/read or alone\n".into());
    }
    let stores = cache.shared.purge(method.clone(), name.clone());
    let what = match (&method, &name) {
        (_, Some(n)) => format!("resources/read of {n:?}"),
        (Some(m), None) => format!("{m} entries"),
        (None, None) => "all entries".into(),
    };
    (200, format!("purged {what} in {stores} route store(s)\n"))
}

/// The stores of one gateway generation, indexed like its routes.
pub struct CacheSet {
    routes: Vec<Option<Arc<RouteCache>>>,
    default: Option<Arc<RouteCache>>,
    /// The stores of the routes federated endpoints learned, by pool (default settings).
    learned: Vec<Option<Arc<RouteCache>>>,
    pub shared: Arc<Shared>,
}

impl CacheSet {
    /// Build the stores of `config`, keeping those of `previous` whose route, pool instances
    /// and cache settings did not change. A pool whose instances changed also forgets its
    /// learned tool parameters.
    pub(crate) fn build(
        config: &Config,
        table: &RouteTable,
        registry: &prometheus::Registry,
        previous: Option<(&CacheSet, &Config, &RouteTable)>,
    ) -> prometheus::Result<CacheSet> {
        let shared = match previous {
            Some((p, _, _)) => p.shared.clone(),
            None => Arc::new(Shared::new(registry)?),
        };
        if let Some((_, old, _)) = previous {
            for (name, pool) in &old.pools {
                if config
                    .pools
                    .get(name)
                    .is_none_or(|c| c.instances != pool.instances)
                {
                    shared.params.forget(name);
                }
            }
        }
        let make = |route: Option<&crate::gateway::stages::route::Route>,
                    cfg: Option<CacheConfig>| {
            let route = route?;
            let cfg = cfg.unwrap_or_default();
            if !cfg.enabled {
                return None;
            }
            let pool: Arc<str> = table.pools[route.pool].as_str().into();
            let kept = previous.and_then(|(p, old, old_table)| {
                let instances = |c: &Config| c.pools.get(&*pool).map(|p| p.instances.clone());
                let same_pool = instances(old) == instances(config);
                let old_ref = old_table
                    .routes
                    .iter()
                    .position(|r| r.name == route.name)
                    .map(RouteRef::Index)
                    .or((route.name == "default").then_some(RouteRef::Default))?;
                let kept = p.get(old_ref)?;
                (same_pool && kept.cfg == cfg && kept.pool == pool).then_some(kept)
            });
            Some(kept.unwrap_or_else(|| {
                let s = Arc::new(RouteCache::new(cfg, pool, &shared));
                shared
                    .stores
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(Arc::downgrade(&s));
                s
            }))
        };
        let routes = table
            .routes
            .iter()
            .zip(&config.routes)
            .map(|(r, c)| make(Some(r), c.cache))
            .collect();
        let default = make(
            table.default.as_ref(),
            config.default_route.as_ref().and_then(|d| d.cache),
        );
        let federated = |pool: &str| {
            let f = config.federation.iter().flat_map(|f| &f.endpoints);
            f.flat_map(|e| &e.pools).any(|p| p == pool)
        };
        let learned = table
            .learned
            .iter()
            .map(|r| match federated(&table.pools[r.pool]) {
                true => make(Some(r), None),
                false => None,
            })
            .collect();
        Ok(CacheSet {
            routes,
            default,
            learned,
            shared,
        })
    }

    /// The store of a route, when its cache is on.
    pub(crate) fn get(&self, r: RouteRef) -> Option<Arc<RouteCache>> {
        match r {
            RouteRef::Index(i) => self.routes.get(i)?.clone(),
            RouteRef::Default => self.default.clone(),
            RouteRef::Learned(p) => self.learned.get(p)?.clone(),
        }
    }
}

#[cfg(test)]
mod tests;
