//! The concurrency limits' metrics: decisions, slots held, requests waiting (the limits
//! themselves: `stages::concurrency`).

use prometheus::{IntCounterVec, IntGaugeVec, Opts, Registry};

/// The concurrency metrics (registered once, kept across reloads).
#[derive(Clone)]
pub struct ConcurrencyMetrics {
    /// `decision`: admitted (a slot was free), queued (admitted after a wait), shed (refused).
    pub decisions: IntCounterVec,
    pub in_flight: IntGaugeVec,
    pub waiting: IntGaugeVec,
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
        registry.register(Box::new(decisions.clone()))?;
        registry.register(Box::new(in_flight.clone()))?;
        registry.register(Box::new(waiting.clone()))?;
        Ok(ConcurrencyMetrics {
            decisions,
            in_flight,
            waiting,
        })
    }
}
