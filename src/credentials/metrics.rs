//! The credential metrics, per pool and mode (labels bounded by the config's pool names):
//! token requests by result, how requests got their credential, and requests answered with an
//! error for want of one. Registered once per process and carried over reloads.

use prometheus::{IntCounterVec, Opts, Registry};

pub struct CredentialMetrics {
    /// `mcp_edge_credential_fetches_total{pool,mode,result}`: requests to a token endpoint;
    /// result `ok`, `unreachable`, `timeout`, `refused`, `invalid_response` or `local`.
    pub fetches: IntCounterVec,
    /// `mcp_edge_credential_cache_total{pool,mode,outcome}`: `hit`, `stale_refresh` (a valid
    /// token served while one refresh runs) or `miss` (the request waited on a fetch).
    pub cache: IntCounterVec,
    /// `mcp_edge_credential_failures_total{pool,mode,reason}`: requests answered 502/503
    /// because the pool's credential could not be obtained.
    pub failures: IntCounterVec,
}

impl CredentialMetrics {
    pub(crate) fn register(registry: &Registry) -> prometheus::Result<CredentialMetrics> {
        let vec = |name: &str, help: &str, last: &str| {
            IntCounterVec::new(Opts::new(name, help), &["pool", "mode", last])
        };
        let m = CredentialMetrics {
            fetches: vec(
                "credential_fetches_total",
                "Token requests to a pool's token endpoint, by result (ok, unreachable, timeout, refused, invalid_response, local).",
                "result",
            )?,
            cache: vec(
                "credential_cache_total",
                "How requests to a pool got its token: hit, stale_refresh (valid token served while a refresh runs), miss (waited on a fetch).",
                "outcome",
            )?,
            failures: vec(
                "credential_failures_total",
                "Requests answered with a gateway error because the pool's credential could not be obtained, by reason.",
                "reason",
            )?,
        };
        registry.register(Box::new(m.fetches.clone()))?;
        registry.register(Box::new(m.cache.clone()))?;
        registry.register(Box::new(m.failures.clone()))?;
        Ok(m)
    }
}
