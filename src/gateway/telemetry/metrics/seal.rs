//! The `requestState` seal's metrics (`pools.<name>.mrtr.seal`): states sealed and opened,
//! states refused on a retry and why, and states that went out unsealed and why.

/// The seal's metrics (registered once, carried over reloads with the registry).
pub struct SealMetrics {
    /// Upstream states sealed, by pool.
    pub sealed: prometheus::IntCounterVec,
    /// Sealed states opened on a retry and forwarded as the server issued them, by pool.
    pub opened: prometheus::IntCounterVec,
    /// Retries refused before any upstream, by pool and reason.
    pub refused: prometheus::IntCounterVec,
    /// Responses whose state could not be sealed (passed on as they were), by pool and why.
    pub unsealed: prometheus::IntCounterVec,
}

impl SealMetrics {
    pub(crate) fn register(r: &prometheus::Registry) -> prometheus::Result<SealMetrics> {
        use prometheus::{IntCounterVec, Opts};
        let counter = |n: &str, h: &str, l: &[&str]| -> prometheus::Result<IntCounterVec> {
            let c = IntCounterVec::new(Opts::new(n, h), l)?;
            r.register(Box::new(c.clone()))?;
            Ok(c)
        };
        Ok(SealMetrics {
            sealed: counter("mrtr_states_sealed_total", "requestState values of input_required results sealed by the gateway (pools.<name>.mrtr.seal), by pool.", &["pool"])?,
            opened: counter("mrtr_states_opened_total", "Sealed requestState values opened on a retry and forwarded as the server issued them, by pool.", &["pool"])?,
            refused: counter("mrtr_state_refusals_total", "Retries refused at the edge for their requestState, by pool and reason: state-not-sealed, state-too-large, state-tampered, state-unknown-key, state-other-caller, state-other-tool, state-other-arguments, state-expired, state-used.", &["pool", "reason"])?,
            unsealed: counter("mrtr_states_unsealed_total", "Responses of a sealing pool whose requestState went out unsealed (its retry is then refused), by pool and why: body_too_large (JSON over 1 MiB), event_too_large (an SSE event over max_bytes), sealed_too_large (the envelope is over max_bytes).", &["pool", "why"])?,
        })
    }
}
