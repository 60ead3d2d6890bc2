//! The shared tier's config: the top-level `redis:` section and each rate limit's `scope` and
//! `on_store_error`.

use serde::Deserialize;
use std::time::Duration;

/// Where a limit's buckets live.
#[derive(Debug, Clone, Copy, Default, Deserialize, schemars::JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// In this gateway process: N replicas admit N times the rate.
    #[default]
    Replica,
    /// In Redis, shared by every replica that uses the same `redis.url` and key prefix.
    Global,
}

/// What a `scope: global` limit does when Redis cannot answer in time (or the circuit is open).
#[derive(Debug, Clone, Copy, Default, Deserialize, schemars::JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum OnStoreError {
    /// Decide on this replica's own bucket, at the rate divided by `redis.replicas`.
    #[default]
    Local,
    /// Admit the request (fail open).
    Allow,
    /// Refuse it with 429 (fail closed).
    Deny,
}

impl Scope {}

impl OnStoreError {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            OnStoreError::Local => "local",
            OnStoreError::Allow => "allow",
            OnStoreError::Deny => "deny",
        }
    }
}

/// `redis:` — the store of `scope: global` limits.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RedisConfig {
    /// `redis://[user:password@]host:port[/db]` (or `rediss://` is refused: no TLS client built in).
    pub url: String,
    /// Longest wait for one limit decision; past it the limit's `on_store_error` decides.
    #[serde(default = "d_timeout", with = "super::humantime_serde_compat")]
    pub timeout: Duration,
    /// Longest wait for a (re)connection attempt, in the background.
    #[serde(default = "d_connect_timeout", with = "super::humantime_serde_compat")]
    pub connect_timeout: Duration,
    /// How many gateway replicas share the limits: `on_store_error: local` admits rate/replicas
    /// on each replica while Redis is away, so the fleet's total stays near the global rate.
    #[serde(default = "d_replicas")]
    pub replicas: u32,
    /// Prefix of every key the gateway writes (keys are `prefix` + a SHA-256 of the limit and
    /// its key, never a raw token).
    #[serde(default = "d_prefix")]
    pub key_prefix: String,
    #[serde(default)]
    pub circuit: CircuitConfig,
}

/// After `failures` store errors in a row, stop asking Redis for `open_for`, then try again.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CircuitConfig {
    #[serde(default = "d_failures")]
    pub failures: u32,
    #[serde(default = "d_open_for", with = "super::humantime_serde_compat")]
    pub open_for: Duration,
}

impl Default for CircuitConfig {
    fn default() -> Self {
        CircuitConfig {
            failures: d_failures(),
            open_for: d_open_for(),
        }
    }
}

fn d_timeout() -> Duration {
    Duration::from_millis(5)
}
fn d_connect_timeout() -> Duration {
    Duration::from_secs(1)
}
fn d_replicas() -> u32 {
    1
}
fn d_prefix() -> String {
    "mcp-edge:rl:".into()
}
fn d_failures() -> u32 {
    5
}
fn d_open_for() -> Duration {
    Duration::from_secs(2)
}

/// Check the shared tier's settings: the `(key, message)` of the first problem.
pub(crate) fn validate(
    redis: Option<&RedisConfig>,
    limits: &[super::RateLimitConfig],
) -> Result<(), (&'static str, String)> {
    if let Some(r) = redis {
        if !(r.url.starts_with("redis://") || r.url.starts_with("redis+unix://")) {
            return Err(("url", format!(
                "redis.url: {:?} is not a redis:// URL; write e.g. redis://127.0.0.1:6379 (TLS is not supported)",
                r.url
            )));
        }
        if let Err(e) = ::redis::Client::open(r.url.as_str()) {
            return Err(("url", format!("redis.url: {:?}: {e}", r.url)));
        }
        if r.timeout.is_zero() {
            return Err((
                "timeout",
                "redis.timeout: must be above 0 (e.g. 5ms)".into(),
            ));
        }
        if r.replicas == 0 {
            return Err((
                "replicas",
                "redis.replicas: must be at least 1 (the number of gateway replicas)".into(),
            ));
        }
        if r.circuit.failures == 0 {
            return Err((
                "failures",
                "redis.circuit.failures: must be at least 1".into(),
            ));
        }
    }
    for (i, l) in limits.iter().enumerate() {
        if l.scope == Scope::Global && redis.is_none() {
            return Err(("scope", format!(
                "rate_limits[{i}].scope: global needs a `redis:` section with a url (or use scope: replica)"
            )));
        }
        if l.scope == Scope::Replica && l.on_store_error.is_some() {
            return Err(("on_store_error", format!(
                "rate_limits[{i}].on_store_error: only used with scope: global; remove it or set scope: global"
            )));
        }
    }
    Ok(())
}

/// The scope and store-error policy of one limit, as `mcp-edge check` prints it.
pub(crate) fn describe_scope(l: &super::RateLimitConfig, redis: Option<&RedisConfig>) -> String {
    match l.scope {
        Scope::Replica => "scope replica (each gateway counts on its own)".into(),
        Scope::Global => {
            let policy = l.on_store_error.unwrap_or_default();
            let replicas = redis.map_or(1, |r| r.replicas);
            let fallback = match policy {
                OnStoreError::Local => format!("this replica's bucket at 1/{replicas} of the rate"),
                OnStoreError::Allow => "admit".into(),
                OnStoreError::Deny => "refuse with 429".into(),
            };
            format!(
                "scope global (shared in Redis); on store error: {} ({fallback})",
                policy.as_str()
            )
        }
    }
}

/// The `redis:` section as `mcp-edge check` prints it (the URL without its password).
pub(crate) fn describe(r: &RedisConfig) -> String {
    let url = match (r.url.find("://"), r.url.rfind('@')) {
        (Some(s), Some(at)) if at > s => format!("{}***{}", &r.url[..s + 3], &r.url[at..]),
        _ => r.url.clone(),
    };
    format!(
        "redis     {url} (keys {}*): timeout {:?}, connect timeout {:?}, {} replica(s); circuit opens for {:?} after {} failures in a row",
        r.key_prefix, r.timeout, r.connect_timeout, r.replicas, r.circuit.open_for, r.circuit.failures
    )
}

#[cfg(test)]
mod tests {
    use crate::config::Config;

    const POOL: &str = "pools:\n  d: {instances: [127.0.0.1:1]}\n";

    fn parse(extra: &str) -> Result<Config, crate::config::ConfigError> {
        Config::parse(&format!("{POOL}{extra}"), "t.yaml")
    }

    #[test]
    fn scope_and_policy_default_to_replica_and_local() {
        let c = parse("redis: {url: 'redis://127.0.0.1:6379'}\nrate_limits:\n  - {name: a, rate: 1/s}\n  - {name: b, rate: 1/s, scope: global}\n").unwrap();
        assert_eq!(c.rate_limits[0].scope, super::Scope::Replica);
        assert_eq!(c.rate_limits[1].scope, super::Scope::Global);
        assert_eq!(c.rate_limits[1].on_store_error, None);
        let r = c.redis.unwrap();
        assert_eq!(r.timeout, std::time::Duration::from_millis(5));
        assert_eq!(r.replicas, 1);
    }

    #[test]
    fn a_global_limit_without_redis_names_its_line_and_the_fix() {
        let e = parse("rate_limits:\n  - name: a\n    rate: 1/s\n    scope: global\n").unwrap_err();
        assert_eq!(e.line, Some(6), "{e}");
        assert!(
            e.message.contains("rate_limits[0].scope") && e.message.contains("redis:"),
            "{e}"
        );
    }

    #[test]
    fn bad_redis_settings_are_refused() {
        let e = parse("redis: {url: 'http://x'}\n").unwrap_err();
        assert!(e.message.contains("redis.url"), "{e}");
        let e = parse("redis: {url: 'redis://h:1', replicas: 0}\n").unwrap_err();
        assert!(e.message.contains("redis.replicas"), "{e}");
        let e = parse("redis: {url: 'redis://h:1', timeout: 0s}\n").unwrap_err();
        assert!(e.message.contains("redis.timeout"), "{e}");
        let e = parse("redis: {url: 'redis://h:1', colour: red}\n").unwrap_err();
        assert!(e.message.contains("colour"), "{e}");
        let e =
            parse("rate_limits:\n  - {name: a, rate: 1/s, on_store_error: deny}\n").unwrap_err();
        assert!(e.message.contains("only used with scope: global"), "{e}");
        let e = parse("redis: {url: 'redis://h:1'}\nrate_limits:\n  - {name: a, rate: 1/s, scope: global, on_store_error: maybe}\n").unwrap_err();
        assert!(
            e.message.contains("on_store_error") || e.message.contains("maybe"),
            "{e}"
        );
    }

    #[test]
    fn check_output_names_scope_policy_and_hides_the_password() {
        let c = parse("redis: {url: 'redis://u:secret@127.0.0.1:6379', replicas: 3}\nrate_limits:\n  - {name: a, rate: 1/s}\n  - {name: b, rate: 9/s, scope: global, on_store_error: deny}\n").unwrap();
        let d = c.describe();
        assert!(d.contains("scope replica"), "{d}");
        assert!(
            d.contains("scope global (shared in Redis); on store error: deny"),
            "{d}"
        );
        assert!(
            d.contains("redis://***@127.0.0.1:6379") && !d.contains("secret"),
            "{d}"
        );
        assert!(d.contains("3 replica(s)"), "{d}");
    }
}
