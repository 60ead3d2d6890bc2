//! The shared rate-limit tier's metrics (`scope: global` limits decided in Redis): the time of
//! a decision, the decisions Redis could not make, the requests a limit's `on_store_error`
//! decided instead, and whether the store is up.

use prometheus::{Histogram, HistogramOpts, IntCounterVec, IntGauge, Opts, Registry};

/// The store's metrics (registered once per registry, kept across reloads).
pub struct StoreMetrics {
    pub(crate) latency: Histogram,
    pub(crate) errors: IntCounterVec,
    pub(crate) fallbacks: IntCounterVec,
    pub(crate) up: IntGauge,
}

impl StoreMetrics {
    pub fn register(registry: &Registry) -> prometheus::Result<StoreMetrics> {
        let latency = Histogram::with_opts(
            HistogramOpts::new(
                "limit_store_seconds",
                "Time of one global rate-limit decision in Redis (answered or timed out)",
            )
            .buckets(vec![
                0.0001, 0.00025, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
            ]),
        )?;
        let errors = IntCounterVec::new(
            Opts::new(
                "limit_store_errors_total",
                "Global rate-limit decisions Redis could not make, by kind (timeout, error, not_connected, circuit_open)",
            ),
            &["kind"],
        )?;
        let fallbacks = IntCounterVec::new(
            Opts::new(
                "limit_store_fallbacks_total",
                "Requests decided by a limit's on_store_error policy instead of Redis",
            ),
            &["limit", "policy"],
        )?;
        let up = IntGauge::new(
            "limit_store_up",
            "1 while the last Redis decision succeeded and the circuit is closed",
        )?;
        registry.register(Box::new(latency.clone()))?;
        registry.register(Box::new(errors.clone()))?;
        registry.register(Box::new(fallbacks.clone()))?;
        registry.register(Box::new(up.clone()))?;
        Ok(StoreMetrics {
            latency,
            errors,
            fallbacks,
            up,
        })
    }
}
