//! The protocol bridge's metrics (2025-era clients served by the gateway): sessions opened,
//! multi round-trip flows run for a legacy client and how they ended, answers that crossed
//! replicas, and the calls waiting for their clients now.

/// The bridge's metrics (registered once, carried over reloads with the registry).
pub struct BridgeMetrics {
    /// Sessions opened (`initialize` answered), by negotiated revision.
    pub sessions: prometheus::IntCounterVec,
    /// Calls of legacy clients that needed input, by how they ended.
    pub flows: prometheus::IntCounterVec,
    /// Client answers by where they went: `local` (this replica held the call) or `forwarded`.
    pub answers: prometheus::IntCounterVec,
    /// Calls waiting for their client's answers on this replica.
    pub waiting: prometheus::IntGauge,
}

impl BridgeMetrics {
    pub(crate) fn register(r: &prometheus::Registry) -> prometheus::Result<BridgeMetrics> {
        use prometheus::{IntCounterVec, IntGauge, Opts};
        let counter = |n: &str, h: &str, l: &[&str]| -> prometheus::Result<IntCounterVec> {
            let c = IntCounterVec::new(Opts::new(n, h), l)?;
            r.register(Box::new(c.clone()))?;
            Ok(c)
        };
        let waiting = IntGauge::new(
            "legacy_calls_waiting",
            "Calls of 2025-era clients waiting for the client's answers on this replica.",
        )?;
        r.register(Box::new(waiting.clone()))?;
        Ok(BridgeMetrics {
            sessions: counter("legacy_sessions_total", "Sessions of 2025-era clients opened by the bridge (initialize answered), by negotiated revision.", &["version"])?,
            flows: counter("legacy_flows_total", "Calls of 2025-era clients that needed input (the fleet answered input_required), by outcome: completed, error (ended with an error), timed_out, cancelled, refused (the client answered with an error).", &["outcome"])?,
            answers: counter("legacy_answers_total", "2025-era clients' answers to the questions the bridge asked, by where they went: local (this replica held the call) or forwarded (sent on to the replica that did).", &["path"])?,
            waiting,
        })
    }
}
