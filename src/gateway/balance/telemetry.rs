//! The balancer's metric families (set from the pools' live state by `balance::stages::metrics`).

use prometheus::{GaugeVec, IntCounterVec, IntGaugeVec, Opts, Registry};

pub struct BalanceMetrics {
    /// Requests sent past their key's home because it was over `load_bound`, by pool.
    pub moved: IntCounterVec,
    /// Least-loaded probes: requests sent to an instance the balancer avoids, by pool and
    /// instance.
    pub probes: IntCounterVec,
    /// MRTR retry legs of a pool with `mrtr.retry_landing: elsewhere`, by where they landed.
    pub retry_landing: IntCounterVec,
    /// Latency outlier ejections (`pools.<name>.outliers`), by pool and instance.
    pub outlier_ejections: IntCounterVec,
    /// 1 while an instance is ejected as a latency outlier.
    pub(crate) outlier_ejected: IntGaugeVec,
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
        let probes = IntCounterVec::new(
            Opts::new(
                "balance_probes_total",
                "Requests a least_loaded pool sent to an instance it avoids, to measure it again (at most one per probe_interval, within probe_share of the pool's requests).",
            ),
            &["pool", "upstream"],
        )?;
        let retry_landing = IntCounterVec::new(
            Opts::new(
                "retry_landing_total",
                "MRTR retry legs of a pool with mrtr.retry_landing: elsewhere, by landing: elsewhere (another instance than the previous leg's), same (no other eligible), untracked (previous leg unknown to this replica).",
            ),
            &["pool", "landing"],
        )?;
        let outlier_ejections = IntCounterVec::new(
            Opts::new(
                "upstream_outlier_ejections_total",
                "Instances ejected as latency outliers (much slower than their pool's baseline over a window: pools.<name>.outliers).",
            ),
            &["pool", "upstream"],
        )?;
        let outlier_ejected = IntGaugeVec::new(
            Opts::new(
                "upstream_outlier_ejected",
                "1 while an instance is ejected as a latency outlier, else 0 (pools with outliers: on).",
            ),
            &["pool", "upstream"],
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
                "The balancer's latency estimate of each instance's time to response head (moved by two samples in a row, smoothed otherwise).",
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
        registry.register(Box::new(probes.clone()))?;
        registry.register(Box::new(retry_landing.clone()))?;
        registry.register(Box::new(outlier_ejections.clone()))?;
        registry.register(Box::new(outlier_ejected.clone()))?;
        registry.register(Box::new(load.clone()))?;
        registry.register(Box::new(latency.clone()))?;
        registry.register(Box::new(weight.clone()))?;
        Ok(BalanceMetrics {
            moved,
            probes,
            retry_landing,
            outlier_ejections,
            outlier_ejected,
            load,
            latency,
            weight,
        })
    }
}
