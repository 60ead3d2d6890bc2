//! The balancer's metric families (set from the pools' live state by `stages::balance::metrics`).

use prometheus::{GaugeVec, IntCounterVec, IntGaugeVec, Opts, Registry};

pub struct BalanceMetrics {
    /// Requests sent past their key's home because it was over `load_bound`, by pool.
    pub moved: IntCounterVec,
    pub(crate) load: IntGaugeVec,
    pub(crate) latency: GaugeVec,
    pub(crate) weight: GaugeVec,
}

impl BalanceMetrics {
    pub(crate) fn register(registry: &Registry) -> prometheus::Result<Self> {
        let moved = IntCounterVec::new(
            Opts::new(
                "balance_hash_moved_total",
                "Requests of a bounded hash pool (load_bound) sent past their key's home instance, which was over its bound.",
            ),
            &["pool"],
        )?;
        let load = IntGaugeVec::new(
            Opts::new(
                "upstream_balancer_load",
                "Requests the balancer counts as in flight on each instance (open subscriptions/listen streams excluded).",
            ),
            &["pool", "upstream"],
        )?;
        let latency = GaugeVec::new(
            Opts::new(
                "upstream_latency_ewma_seconds",
                "The balancer's peak-sensitive moving average of each instance's time to response head (decayed to now).",
            ),
            &["pool", "upstream"],
        )?;
        let weight = GaugeVec::new(
            Opts::new(
                "upstream_effective_weight",
                "Each instance's weight times its slow-start ramp (the share it takes now).",
            ),
            &["pool", "upstream"],
        )?;
        registry.register(Box::new(moved.clone()))?;
        registry.register(Box::new(load.clone()))?;
        registry.register(Box::new(latency.clone()))?;
        registry.register(Box::new(weight.clone()))?;
        Ok(BalanceMetrics {
            moved,
            load,
            latency,
            weight,
        })
    }
}
