//! The auth metrics: decisions by result, reason and rule (all bounded: fixed lists and the
//! config's rule names), JWKS refresh failures and the age of the key set in use.

use prometheus::{IntCounter, IntCounterVec, IntGauge, Opts, Registry};

pub struct AuthMetrics {
    /// `mcp_edge_auth_decisions_total{result,reason,rule}`; result is `allowed`, `unauthorized`
    /// (401), `forbidden` (403), `bad_request` (400) or `unavailable` (503).
    pub decisions: IntCounterVec,
    /// `mcp_edge_auth_jwks_refresh_failures_total`.
    pub jwks_failures: IntCounter,
    /// `mcp_edge_auth_jwks_age_seconds`: since the key set in use was obtained.
    pub jwks_age: IntGauge,
}

impl AuthMetrics {
    pub(crate) fn register(registry: &Registry) -> prometheus::Result<AuthMetrics> {
        let decisions = IntCounterVec::new(
            Opts::new(
                "auth_decisions_total",
                "Auth decisions: result (allowed, unauthorized, forbidden, bad_request, unavailable), reason, and the rule that decided (empty when none).",
            ),
            &["result", "reason", "rule"],
        )?;
        let jwks_failures = IntCounter::new(
            "auth_jwks_refresh_failures_total",
            "JWKS fetches or reads that failed (the previous keys stay in use).",
        )?;
        let jwks_age = IntGauge::new(
            "auth_jwks_age_seconds",
            "Seconds since the JWKS in use was fetched or read.",
        )?;
        registry.register(Box::new(decisions.clone()))?;
        registry.register(Box::new(jwks_failures.clone()))?;
        registry.register(Box::new(jwks_age.clone()))?;
        Ok(AuthMetrics {
            decisions,
            jwks_failures,
            jwks_age,
        })
    }

    #[cfg(test)]
    /// A detached set (not exported), for a gateway built without a registry and for tests.
    pub(crate) fn detached() -> AuthMetrics {
        AuthMetrics::register(&Registry::new()).expect("fresh registry")
    }

    pub(crate) fn count(&self, result: &str, reason: &str, rule: &str) {
        self.decisions
            .with_label_values(&[result, reason, rule])
            .inc();
    }
}
