//! `pools:` and `retries:`: the upstream instances of each pool, how requests are balanced over
//! them (round robin, least loaded, or consistent hash with its key and load bound; weights and
//! slow start), active health checks, passive ejection (latency outliers in [`super::balance`]), which failed requests are tried on
//! another instance, and (in `credentials`) how the gateway authenticates to the instances.

use serde::{Deserialize, Deserializer};
use std::fmt;
use std::time::Duration;

use super::{humantime_serde_compat, tls};

#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PoolConfig {
    /// `host:port` of each instance.
    pub instances: Vec<String>,
    #[serde(default)]
    pub balance: Balance,
    /// With `balance: hash`: `mcp-name` (default), `principal` or `header:<name>`.
    #[serde(default)]
    pub hash_key: Option<HashKey>,
    /// With `balance: hash`: no instance takes more than `(1 + load_bound)` times the pool's
    /// average in-flight load; a key whose home is over it goes to the next instance on the
    /// ring until the home drains (consistent hashing with bounded loads). Off when absent.
    #[serde(default)]
    pub load_bound: Option<f64>,
    /// With `balance: least_loaded`: the time constant of the latency average (how fast a
    /// slow spell is forgotten, and an instance that got no traffic since is tried again).
    #[serde(default = "d_latency_decay", with = "humantime_serde_compat")]
    pub latency_decay: Duration,
    /// With `balance: least_loaded`: an instance without a sample for this long (one the
    /// balancer avoids) gets one real request, a probe, to measure it again. Default 2s.
    #[serde(default = "d_probe_interval", with = "humantime_serde_compat")]
    pub probe_interval: Duration,
    /// With `balance: least_loaded`: the most probes may be of the pool's requests (a share,
    /// above 0 and up to 1).
    #[serde(default = "d_probe_share")]
    pub probe_share: f64,
    /// Relative weight of instances (by their `host:port` as listed); unlisted ones weigh 1.
    #[serde(default)]
    pub weights: std::collections::BTreeMap<String, u32>,
    /// A new instance (added on reload) or one back from down or ejected takes a share that
    /// grows linearly from 10% to its full share over this window. `0s` (the default) is off.
    #[serde(default, with = "humantime_serde_compat")]
    pub slow_start: Duration,
    /// Active health checks.
    #[serde(default)]
    pub health: HealthConfig,
    /// Passive ejection of instances that fail requests.
    #[serde(default)]
    pub ejection: EjectionConfig,
    /// Ejection of instances much slower than the rest of the pool ([`super::balance`]).
    /// Absent: off.
    #[serde(default)]
    pub outliers: Option<super::balance::OutlierConfig>,
    /// Connect to the instances over TLS ([`tls::UpstreamTls`]).
    #[serde(default)]
    pub tls: Option<tls::UpstreamTls>,
    /// HTTP version to the instances: h1 (default), h2, auto (ALPN, with tls).
    #[serde(default)]
    pub http: tls::UpstreamHttp,
    /// How the gateway authenticates to the instances (static secret, client credentials, or
    /// token exchange for the caller); the caller's own token never goes to such a pool.
    #[serde(default)]
    pub credentials: Option<crate::credentials::config::CredentialsConfig>,
    /// Multi round-trip calls: `seal` the servers' `requestState` at the edge, and where retry
    /// legs land (`retry_landing`).
    #[serde(default)]
    pub mrtr: super::mrtr::MrtrConfig,
    /// The protocol revision the instances speak: `2026-07-28` (the default), or a 2025-era
    /// revision (`2025-11-25`, `2025-06-18`, `2025-03-26`): the gateway then holds sessions to
    /// them and serves 2026 clients from them, mid-call questions included (docs/bridge.md).
    /// A 2025-era pool's `health.check: mcp` probes by TCP connect (it has no server/discover).
    #[serde(default)]
    pub era: PoolEra,
    /// What a 2025-era client's session does on this pool: `bridge` (the default: the gateway is
    /// the session and speaks 2026-07-28 to the instances) or `pass` (the instances serve 2025-era
    /// clients themselves, as TypeScript SDK v2 servers with a sessionful legacy leg do: the
    /// client's requests go through unchanged, each session pinned to the instance that opened
    /// it by a sealed session id; docs/bridge.md).
    #[serde(default)]
    pub legacy_clients: PoolLegacyClients,
    /// Pin the pool's tool and prompt definitions (docs/pins.md): `off` (the default), `hold`
    /// (a changed one is not listed and its calls are refused until approved) or `flag` (listed
    /// and callable, flagged until approved).
    #[serde(default)]
    pub pins: super::pins::PinPolicy,
    /// How many requests may be in the pool at once: a limit found from its latency
    /// (`adaptive: true`) or fixed; absent: no limit (docs/overload.md).
    #[serde(default)]
    pub concurrency: Option<super::adaptive::PoolConcurrency>,
}

/// What a pool's instances speak.
#[derive(Debug, Clone, Copy, Deserialize, schemars::JsonSchema, PartialEq, Eq, Default)]
pub enum PoolEra {
    #[default]
    #[serde(rename = "2026-07-28")]
    Modern,
    #[serde(rename = "2025-11-25")]
    V2025_11_25,
    #[serde(rename = "2025-06-18")]
    V2025_06_18,
    #[serde(rename = "2025-03-26")]
    V2025_03_26,
}

impl PoolEra {
    /// The 2025-era revision, for a legacy pool.
    pub fn legacy_version(self) -> Option<&'static str> {
        match self {
            PoolEra::Modern => None,
            PoolEra::V2025_11_25 => Some("2025-11-25"),
            PoolEra::V2025_06_18 => Some("2025-06-18"),
            PoolEra::V2025_03_26 => Some("2025-03-26"),
        }
    }
}

/// What a 2025-era client's session does on a pool.
#[derive(Debug, Clone, Copy, Deserialize, schemars::JsonSchema, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
pub enum PoolLegacyClients {
    /// The gateway is the session; the instances see 2026-07-28 requests.
    #[default]
    Bridge,
    /// The instances are the session: passed through, pinned to the instance that opened it.
    Pass,
}

/// How instances are probed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum HealthCheckKind {
    /// POST `server/discover` with the required MCP headers; healthy on HTTP 200.
    #[default]
    Mcp,
    /// A TCP connect.
    Tcp,
    /// No active checks (instances are up unless ejected).
    Off,
}

#[derive(Debug, Clone, Deserialize, schemars::JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct HealthConfig {
    #[serde(default)]
    pub check: HealthCheckKind,
    #[serde(default = "d_health_interval", with = "humantime_serde_compat")]
    pub interval: Duration,
    #[serde(default = "d_health_timeout", with = "humantime_serde_compat")]
    pub timeout: Duration,
    /// Consecutive passing checks that bring a down instance back.
    #[serde(default = "d_two")]
    pub healthy_threshold: u32,
    /// Consecutive failing checks that take an instance down.
    #[serde(default = "d_two")]
    pub unhealthy_threshold: u32,
}

impl Default for HealthConfig {
    fn default() -> Self {
        HealthConfig {
            check: HealthCheckKind::default(),
            interval: d_health_interval(),
            timeout: d_health_timeout(),
            healthy_threshold: d_two(),
            unhealthy_threshold: d_two(),
        }
    }
}

#[derive(Debug, Clone, Deserialize, schemars::JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct EjectionConfig {
    /// Consecutive failed requests (5xx answers, resets after delivery) that eject an instance;
    /// a refused connection ejects at once. 0 turns passive ejection off.
    #[serde(default = "d_three")]
    pub consecutive_failures: u32,
    /// First ejection time; each further ejection in a row doubles it up to `max_time`.
    #[serde(default = "d_eject_base", with = "humantime_serde_compat")]
    pub base_time: Duration,
    #[serde(default = "d_eject_max", with = "humantime_serde_compat")]
    pub max_time: Duration,
}

impl Default for EjectionConfig {
    fn default() -> Self {
        EjectionConfig {
            consecutive_failures: d_three(),
            base_time: d_eject_base(),
            max_time: d_eject_max(),
        }
    }
}

/// The least-loaded EWMA's default time constant (`latency_decay`): after this long without
/// samples, an instance's estimate has fallen to 1/e.
pub(crate) const LATENCY_DECAY: Duration = Duration::from_secs(10);

/// `probe_interval`'s default.
pub(crate) const PROBE_INTERVAL: Duration = Duration::from_secs(2);
/// `probe_share`'s default.
pub(crate) const PROBE_SHARE: f64 = 0.01;

fn d_probe_interval() -> Duration {
    PROBE_INTERVAL
}
fn d_probe_share() -> f64 {
    PROBE_SHARE
}
fn d_latency_decay() -> Duration {
    LATENCY_DECAY
}
fn d_health_interval() -> Duration {
    Duration::from_secs(2)
}
fn d_health_timeout() -> Duration {
    Duration::from_secs(1)
}
fn d_two() -> u32 {
    2
}
fn d_three() -> u32 {
    3
}
fn d_eject_base() -> Duration {
    Duration::from_secs(5)
}
fn d_eject_max() -> Duration {
    Duration::from_secs(60)
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Balance {
    #[default]
    RoundRobin,
    /// Consistent hashing (ketama): adding or removing one of N instances moves about 1/N keys.
    Hash,
    /// The better of two random instances by in-flight requests times a peak-sensitive
    /// moving average of latency (power of two choices): slow instances get less.
    LeastLoaded,
}

impl Balance {
    pub(crate) fn label(self) -> &'static str {
        match self {
            Balance::RoundRobin => "round_robin",
            Balance::Hash => "hash",
            Balance::LeastLoaded => "least_loaded",
        }
    }
}

/// What a `hash` pool shards on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HashKey {
    /// The decoded `Mcp-Name` (tool name, prompt name or resource URI).
    McpName,
    /// A hash of the `Authorization: Bearer` token (the token itself is never kept).
    Principal,
    /// The value of a named request header.
    Header(http::HeaderName),
    /// A claim of the verified token (`claim:<name>`; needs `auth`).
    Claim(String),
    /// `param:<Name>`: the decoded `Mcp-Param-<Name>` header (base64-wrapped and plain spellings
    /// of one value shard alike). For tools the gateway knows from `tools/list`, the header was
    /// checked against the argument (the `Mcp-Param-*` header check).
    Param(http::HeaderName),
}

impl fmt::Display for HashKey {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            HashKey::McpName => f.write_str("mcp-name"),
            HashKey::Principal => f.write_str("principal"),
            HashKey::Header(h) => write!(f, "header:{h}"),
            HashKey::Claim(c) => write!(f, "claim:{c}"),
            HashKey::Param(h) => write!(
                f,
                "param:{}",
                h.as_str()
                    .strip_prefix(crate::mcp::header::PARAM_PREFIX)
                    .unwrap_or(h.as_str())
            ),
        }
    }
}

impl<'de> Deserialize<'de> for HashKey {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        match s.as_str() {
            "mcp-name" => Ok(HashKey::McpName),
            "principal" => Ok(HashKey::Principal),
            other if other.starts_with("claim:") && other.len() > 6 => {
                Ok(HashKey::Claim(other[6..].trim().to_string()))
            }
            other if other.starts_with("param:") => {
                let n = other["param:".len()..].trim();
                let full = format!("{}{}", crate::mcp::header::PARAM_PREFIX, n.to_ascii_lowercase());
                match http::HeaderName::from_bytes(full.as_bytes()) {
                    Ok(h) if !n.is_empty() => Ok(HashKey::Param(h)),
                    _ => Err(serde::de::Error::custom(format!(
                        "hash_key: param:{n:?} does not name an Mcp-Param header; write e.g. param:Region"
                    ))),
                }
            }
            other => match other.strip_prefix("header:") {
                Some(h) => http::HeaderName::from_bytes(h.trim().as_bytes())
                    .map(HashKey::Header)
                    .map_err(|_| {
                        serde::de::Error::custom(format!(
                            "hash_key: {h:?} is not a valid header name"
                        ))
                    }),
                None => Err(serde::de::Error::custom(format!(
                    "hash_key: unknown key {other:?}; use mcp-name, principal, header:<name>, claim:<name> or param:<Name>"
                ))),
            },
        }
    }
}

/// Which failed requests are tried again on another instance.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Retries {
    /// A request that never reached an instance (connection refused or timed out) is tried on up
    /// to this many other instances of its pool. A request that was delivered is never re-sent:
    /// `tools/call` may have side effects.
    #[serde(default = "default_connect_retries")]
    pub connect_failure: usize,
}

impl Default for Retries {
    fn default() -> Self {
        Retries {
            connect_failure: default_connect_retries(),
        }
    }
}

fn default_connect_retries() -> usize {
    2
}

/// The balancing keys of one pool: a load bound on hash pools only (and above 0), weights of
/// listed instances (1 to 1000), slow start on hash pools only with a bound (it works through
/// the bound there). `Err` is the key's path and the message.
pub(super) fn check_balance(name: &str, pool: &PoolConfig) -> Result<(), (String, String)> {
    let at = |k: &str| format!("pools.{name}.{k}");
    if let Some(b) = pool.load_bound {
        if pool.balance != Balance::Hash {
            return Err((at("load_bound"), format!(
                "pools.{name}.load_bound: only used with `balance: hash` (least_loaded already avoids busy instances); remove it or use balance: hash"
            )));
        }
        if !(b > 0.0 && b <= 10.0) {
            return Err((at("load_bound"), format!(
                "pools.{name}.load_bound: {b} is out of range; write a share above 0 and up to 10, e.g. 0.25 (no instance above 1.25x the average load)"
            )));
        }
    }
    if pool.latency_decay < std::time::Duration::from_millis(100) {
        return Err((at("latency_decay"), format!(
            "pools.{name}.latency_decay: {:?} is too short to average anything; write at least 100ms (the default is 10s)",
            pool.latency_decay
        )));
    }
    if pool.probe_interval < std::time::Duration::from_millis(100) {
        return Err((at("probe_interval"), format!(
            "pools.{name}.probe_interval: {:?} would probe an avoided instance all the time; write at least 100ms (the default is 2s)",
            pool.probe_interval
        )));
    }
    if !(pool.probe_share > 0.0 && pool.probe_share <= 1.0) {
        return Err((at("probe_share"), format!(
            "pools.{name}.probe_share: {} is out of range; write a share above 0 and up to 1, e.g. 0.01 (at most 1% of the pool's requests are probes)",
            pool.probe_share
        )));
    }
    for (inst, w) in &pool.weights {
        if !pool.instances.contains(inst) {
            return Err((at(&format!("weights.{inst}")), format!(
                "pools.{name}.weights: {inst:?} is not one of the pool's instances ({}); weigh instances by the host:port listed in instances",
                pool.instances.join(", ")
            )));
        }
        if !(1..=1000).contains(w) {
            return Err((at(&format!("weights.{inst}")), format!(
                "pools.{name}.weights.{inst}: {w} is out of range; write a weight from 1 to 1000 (remove an instance from instances to stop sending it traffic)"
            )));
        }
    }
    if !pool.slow_start.is_zero() && pool.balance == Balance::Hash && pool.load_bound.is_none() {
        return Err((at("slow_start"), format!(
            "pools.{name}.slow_start: a hash pool ramps an instance up through its load bound; add load_bound (e.g. 0.25) or remove slow_start"
        )));
    }
    Ok(())
}
