//! The cache's metrics, registered once in the gateway's registry (they outlive reloads). The
//! `method` label is one of the six cacheable methods.

use prometheus::{IntCounter, IntCounterVec, IntGauge, Opts, Registry};

pub struct CacheMetrics {
    pub hits: IntCounterVec,
    pub misses: IntCounterVec,
    pub stores: IntCounterVec,
    pub evictions: IntCounterVec,
    pub coalesced: IntCounterVec,
    /// Results not stored, by reason (`ttl-zero`, `not-complete`, `too-large`, ...).
    pub skipped: IntCounterVec,
    pub stale_served: IntCounterVec,
    pub bytes: IntGauge,
    pub entries: IntGauge,
    pub invalidations: IntCounter,
    /// `tools/call` requests refused for a missing or wrong `Mcp-Param-*` header (the
    /// `x-mcp-header` check).
    pub param_refusals: IntCounter,
}

impl CacheMetrics {
    pub(crate) fn new(r: &Registry) -> prometheus::Result<CacheMetrics> {
        let vec = |name: &str, help: &str, labels: &[&str]| -> prometheus::Result<IntCounterVec> {
            let c = IntCounterVec::new(Opts::new(name, help), labels)?;
            r.register(Box::new(c.clone()))?;
            Ok(c)
        };
        let gauge = |name: &str, help: &str| -> prometheus::Result<IntGauge> {
            let g = IntGauge::new(name, help)?;
            r.register(Box::new(g.clone()))?;
            Ok(g)
        };
        let counter = |name: &str, help: &str| -> prometheus::Result<IntCounter> {
            let c = IntCounter::new(name, help)?;
            r.register(Box::new(c.clone()))?;
            Ok(c)
        };
        Ok(CacheMetrics {
            hits: vec("cache_hits_total", "Requests answered from the edge cache.", &["method"])?,
            misses: vec("cache_misses_total", "Cacheable requests forwarded because no fresh entry was stored.", &["method"])?,
            stores: vec("cache_stores_total", "Responses stored in the edge cache.", &["method"])?,
            evictions: vec("cache_evictions_total", "Entries removed for size or expiry.", &["method"])?,
            coalesced: vec("cache_coalesced_waits_total", "Requests that waited for an identical request in flight instead of fetching.", &["method"])?,
            skipped: vec("cache_not_stored_total", "Cacheable responses not stored, by reason.", &["method", "reason"])?,
            stale_served: vec("cache_stale_served_total", "Stale entries served because the refetch failed (stale_if_error).", &["method"])?,
            bytes: gauge("cache_bytes", "Bytes charged to the edge cache (bodies plus a fixed overhead per entry).")?,
            entries: gauge("cache_entries", "Entries in the edge cache.")?,
            invalidations: counter("cache_invalidations_total", "Invalidating notifications (list_changed, resources/updated) seen on proxied streams.")?,
            param_refusals: counter("cache_param_header_refusals_total", "tools/call requests refused because an Mcp-Param-* header learned from tools/list was missing or wrong.")?,
        })
    }
}
