//! The concurrency limits' metrics: decisions, slots held, requests waiting, and each pool's
//! limit (`pools.<name>.concurrency`), its requests in flight and its decisions by leg (the
//! limits themselves: `concurrency::stages`).

use prometheus::{IntCounterVec, IntGaugeVec, Opts, Registry};

/// The concurrency metrics (registered once, kept across reloads).
#[derive(Clone)]
pub struct ConcurrencyMetrics {
    /// `decision`: admitted (a slot was free), queued (admitted after a wait), shed (refused).
    pub decisions: IntCounterVec,
    pub in_flight: IntGaugeVec,
    pub waiting: IntGaugeVec,
    /// A pool's concurrency limit now (adaptive or fixed).
    pub pool_limit: IntGaugeVec,
    /// Requests holding a slot of a pool's limit.
    pub pool_in_flight: IntGaugeVec,
    /// A pool limit's decisions by `leg` (first: a new call; started: a retry leg or tasks/*)
    /// and `decision` (admitted, queued, shed).
    pub pool_decisions: IntCounterVec,
}

impl ConcurrencyMetrics {
    pub(crate) fn register(registry: &Registry) -> prometheus::Result<Self> {
        let decisions = IntCounterVec::new(
            Opts::new(
                "concurrency_decisions_total",
                "Concurrency-limit decisions by limit: admitted, queued (admitted after a wait) or shed (503).",
            ),
            &["limit", "decision"],
        )?;
        let in_flight = IntGaugeVec::new(
            Opts::new(
                "concurrency_in_flight",
                "Requests holding a slot of each concurrency limit.",
            ),
            &["limit"],
        )?;
        let waiting = IntGaugeVec::new(
            Opts::new(
                "concurrency_waiting",
                "Requests waiting in the queue of each concurrency limit.",
            ),
            &["limit"],
        )?;
        let pool_limit = IntGaugeVec::new(
            Opts::new(
                "pool_concurrency_limit",
                "Each pool's concurrency limit now (pools.<name>.concurrency; adaptive or fixed).",
            ),
            &["pool"],
        )?;
        let pool_in_flight = IntGaugeVec::new(
            Opts::new(
                "pool_concurrency_in_flight",
                "Requests holding a slot of each pool's concurrency limit.",
            ),
            &["pool"],
        )?;
        let pool_decisions = IntCounterVec::new(
            Opts::new(
                "pool_concurrency_decisions_total",
                "Pool concurrency-limit decisions by leg (first: a new call; started: a retry leg or tasks/*): admitted, queued (after a wait) or shed (503, -31018).",
            ),
            &["pool", "leg", "decision"],
        )?;
        for c in [&pool_limit, &pool_in_flight] {
            registry.register(Box::new(c.clone()))?;
        }
        registry.register(Box::new(pool_decisions.clone()))?;
        registry.register(Box::new(decisions.clone()))?;
        registry.register(Box::new(in_flight.clone()))?;
        registry.register(Box::new(waiting.clone()))?;
        Ok(ConcurrencyMetrics {
            decisions,
            in_flight,
            waiting,
            pool_limit,
            pool_in_flight,
            pool_decisions,
        })
    }
}
