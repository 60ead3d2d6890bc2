//! The federation's metrics: catalog refreshes and states, catalog sizes, collisions, merged
//! answers and where each pool's part of them came from.

/// The federation's metrics (registered once, carried over reloads with the registry).
pub struct FederationMetrics {
    /// Catalog refreshes by pool and result.
    pub refreshes: prometheus::IntCounterVec,
    /// 1 for each pool's current catalog state.
    pub state: prometheus::IntGaugeVec,
    /// Entries in each pool's catalog, by kind.
    pub entries: prometheus::IntGaugeVec,
    /// Names two or more pools of an endpoint serve.
    pub collisions: prometheus::IntGaugeVec,
    /// Merged answers by endpoint and method.
    pub answers: prometheus::IntCounterVec,
    /// Where each pool's part of a merged answer came from: catalog, fetched or unavailable.
    pub parts: prometheus::IntCounterVec,
}

impl FederationMetrics {
    pub(crate) fn register(r: &prometheus::Registry) -> prometheus::Result<FederationMetrics> {
        use prometheus::{IntCounterVec, IntGaugeVec, Opts};
        let counter = |n: &str, h: &str, l: &[&str]| -> prometheus::Result<IntCounterVec> {
            let c = IntCounterVec::new(Opts::new(n, h), l)?;
            r.register(Box::new(c.clone()))?;
            Ok(c)
        };
        let gauge = |n: &str, h: &str, l: &[&str]| -> prometheus::Result<IntGaugeVec> {
            let g = IntGaugeVec::new(Opts::new(n, h), l)?;
            r.register(Box::new(g.clone()))?;
            Ok(g)
        };
        Ok(FederationMetrics {
            refreshes: counter("catalog_refreshes_total", "Federation catalog refreshes by pool and result (ok, failed).", &["pool", "result"])?,
            state: gauge("catalog_state", "1 for the state each federated pool's catalog is in: unknown (never loaded), fresh, stale (refresh failing, last catalog in use) or expired (refresh failing past catalog.keep_stale).", &["pool", "state"])?,
            entries: gauge("catalog_entries", "Entries in each federated pool's catalog, by list (tools, prompts, resources, resourceTemplates).", &["pool", "list"])?,
            collisions: gauge("federation_collisions", "Names or URIs two or more pools of a federated endpoint serve.", &["endpoint"])?,
            answers: counter("federation_answers_total", "Merged answers (lists, server/discover) by federated endpoint and method.", &["endpoint", "method"])?,
            parts: counter("federation_parts_total", "Each pool's part of a merged answer, by where it came from: catalog (fresh by the pool's own ttlMs and cacheScope), fetched (asked again for this answer) or unavailable.", &["pool", "list", "source"])?,
        })
    }
}
