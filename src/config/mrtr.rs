//! `pools.<name>.mrtr`: what the gateway does for a pool's multi round-trip calls: where retry
//! legs land (`retry_landing`, `gateway::balance::stages`), and `seal`: every `requestState` the pool's servers return is sealed by the gateway (bound
//! to the caller, the tool and the arguments, with an expiry) and opened again on the retry,
//! for servers that do not protect their own state. Off by default. The gateway's side is
//! `gateway::stages::seal`; the envelope is `mcp::state_seal`.
//!
//! On the pool, not on a route: a state belongs to the servers that issued it, and every route
//! (or federated name) that reaches the pool must open it the same way.

use serde::Deserialize;
use std::path::PathBuf;
use std::time::Duration;

use super::humantime_serde_compat;
use super::OnStoreError;

/// `pools.<name>.mrtr`.
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct MrtrConfig {
    /// Seal the pool's `requestState` at the edge (absent: off, states pass untouched).
    #[serde(default)]
    pub seal: Option<SealConfig>,
    /// Where a retry leg (a request carrying `requestState`) lands: `any` (the default: balanced
    /// like any request) or `elsewhere` (an instance other than the one that served the
    /// previous leg of its flow, and than leg 1's when a third is eligible; the same instance
    /// only when no other is eligible). For load tests, canaries and continuous proof that the
    /// servers keep no state between legs. Needs `flows` (on by default).
    #[serde(default)]
    pub retry_landing: RetryLanding,
}

/// `pools.<name>.mrtr.seal`.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SealConfig {
    /// The key file, the same on every replica: one 32-byte key a line (64 hex digits or
    /// base64, e.g. `openssl rand -hex 32`); the first line seals, every line opens (rotation:
    /// add the new key on top, drop the old one once its states have expired).
    pub key_file: PathBuf,
    /// How long a sealed state is accepted after it was issued.
    #[serde(default = "d_ttl", with = "humantime_serde_compat")]
    pub ttl: Duration,
    /// The longest sealed state accepted on a retry, in bytes (a longer one is refused before
    /// any upstream; a server state that would seal longer is counted).
    #[serde(default = "d_max_bytes")]
    pub max_bytes: usize,
    /// One-time use: `off` (default), `local` (this replica refuses a state it already
    /// forwarded, until the state expires), or `global` (every replica: the record is in the
    /// top-level `redis:`).
    #[serde(default)]
    pub one_time: OneTime,
    /// With `one_time: global`, what a retry gets when Redis cannot answer in time: `local`
    /// (the default: this replica's own record decides), `allow` (forwarded unchecked for
    /// reuse) or `deny` (503 + Retry-After + -31019; the state stays valid).
    #[serde(default)]
    pub on_store_error: Option<OnStoreError>,
}

/// Whether a sealed state may be redeemed more than once.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum OneTime {
    /// A state may be presented as often as the server accepts it, until it expires.
    #[default]
    Off,
    /// A replica forwards a state once; it refuses the state again until it expires.
    Local,
    /// A state is forwarded once across every replica sharing the `redis:` store.
    Global,
}

fn d_ttl() -> Duration {
    Duration::from_secs(600)
}
fn d_max_bytes() -> usize {
    16 * 1024
}

/// Checks of `pools.<name>.mrtr` that need the pool: `(key, message)` of the first failure.
///
/// What it needs of the pool: `legacy`, the 2025 revision it speaks if it does, and `plain`,
/// whether its requests go as plain HTTP/1.1 on the direct leg (the only ones whose retry body
/// the gateway rewrites); and of the file, `redis`: whether a top-level `redis:` is set.
pub(super) fn check(
    name: &str,
    mrtr: &MrtrConfig,
    legacy: Option<&str>,
    plain: bool,
    redis: bool,
) -> Result<(), (String, String)> {
    let Some(seal) = mrtr.seal.as_ref() else {
        return Ok(());
    };
    let at = format!("pools.{name}.mrtr.seal");
    if let Some(v) = legacy {
        return Err((at.clone(), format!(
            "{at}: pool {name:?} speaks {v}: the gateway already seals the state of its paused calls itself (docs/bridge.md); remove mrtr.seal"
        )));
    }
    if !plain {
        return Err((at.clone(), format!(
            "{at}: sealing rewrites the retry's body, which the gateway does on plain HTTP/1.1 pools on the direct leg only (connections.upstream_leg: direct); pool {name:?} uses TLS or h2 or another leg: remove mrtr.seal or make the pool plain HTTP/1.1"
        )));
    }
    if seal.ttl.is_zero() {
        return Err((
            format!("{at}.ttl"),
            format!(
                "{at}.ttl: must be above 0s (every state would be expired); use e.g. `ttl: 10m`"
            ),
        ));
    }
    if seal.one_time == OneTime::Global && !redis {
        return Err((format!("{at}.one_time"), format!(
            "{at}.one_time: global keeps the record of used states in Redis, and the file has no top-level `redis:`; add `redis: {{url: redis://127.0.0.1:6379}}` or use `one_time: local`"
        )));
    }
    if seal.on_store_error.is_some() && seal.one_time != OneTime::Global {
        return Err((format!("{at}.on_store_error"), format!(
            "{at}.on_store_error: says what to do when Redis cannot answer, which only `one_time: global` asks; remove it or set `one_time: global`"
        )));
    }
    if seal.max_bytes < 256 {
        return Err((format!("{at}.max_bytes"), format!(
            "{at}.max_bytes: {} is too small for any sealed state (the envelope alone takes ~200 bytes); use e.g. `max_bytes: 16384`",
            seal.max_bytes
        )));
    }
    Ok(())
}

/// `pools.<name>.mrtr.retry_landing`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RetryLanding {
    /// Retry legs are balanced like any request.
    #[default]
    Any,
    /// Retry legs go to another instance than their flow's previous leg whenever one is eligible.
    Elsewhere,
}

#[cfg(test)]
mod tests {
    use crate::config::Config;

    /// The error of `gateway.yaml` holding `seal` on pool `p`, with `extra` at the top.
    fn error_of(seal: &str, extra: &str) -> String {
        let text = format!(
            "{extra}pools:\n  p:\n    instances: [127.0.0.1:9]\n    mrtr:\n      seal: {seal}\ndefault_route: {{pool: p}}\n"
        );
        format!("{:#}", Config::parse(&text, "gateway.yaml").unwrap_err())
    }

    #[test]
    fn one_time_global_without_redis_names_the_file_line_key_and_fix() {
        let e = error_of("{key_file: k, one_time: global}", "");
        assert!(e.contains("gateway.yaml:"), "{e}");
        assert!(e.contains("pools.p.mrtr.seal.one_time: global"), "{e}");
        assert!(e.contains("add `redis: {url:"), "{e}");
        let e = error_of("{key_file: k, on_store_error: deny}", "");
        assert!(
            e.contains("pools.p.mrtr.seal.on_store_error") && e.contains("one_time: global"),
            "{e}"
        );
        let ok = "redis: {url: 'redis://127.0.0.1:6379'}\npools:\n  p:\n    instances: [127.0.0.1:9]\n    mrtr:\n      seal: {key_file: k, one_time: global, on_store_error: deny}\ndefault_route: {pool: p}\n";
        Config::parse(ok, "gateway.yaml").unwrap();
    }
}
