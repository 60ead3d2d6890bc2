//! `gateway.yaml`: the schema, its defaults, validation with line-precise errors, and the
//! resolved route table that `mcp-edge check` prints.
//!
//! Loading never half-succeeds: a file with an unknown key, a bad value or a dangling reference
//! is refused as a whole with an error naming the file, the line, the key and what would be valid.

use serde::{Deserialize, Deserializer};
use std::collections::BTreeMap;
use std::fmt::{self, Write as _};
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::Path;
use std::time::Duration;

use crate::gateway::route::Pattern;

pub mod redis;
pub use redis::{OnStoreError, RedisConfig, Scope};
pub mod auth;
mod auth_keys;
pub mod cache;
pub mod tls;
pub use cache::CacheConfig;
pub mod concurrency;
pub mod connections;
pub mod flows;
pub use concurrency::ConcurrencyLimitConfig;
pub use flows::{FlowsConfig, TracingConfig};

/// The configuration of one gateway, as loaded and validated.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    #[serde(default)]
    pub listen: Listen,
    /// The MCP endpoint path (POST only).
    #[serde(default = "default_endpoint")]
    pub endpoint: String,
    /// Worker threads of the proxy (1 is fastest on a 2-core machine shared with its upstreams).
    #[serde(default = "default_threads")]
    pub threads: usize,
    /// Let proxy threads steal each other's work (tokio's multi-thread scheduler). Off by default:
    /// one single-threaded runtime per thread measured faster here. Turn it on when several
    /// gateways start and stop inside one process (tests): pingora's no-steal runtime keeps a
    /// per-thread handle that a later runtime's recycled thread can inherit.
    #[serde(default)]
    pub work_stealing: bool,
    /// Idle upstream connections kept for reuse, across all instances (pingora's
    /// `upstream_keepalive_pool_size`, per thread). pingora's default of 128 is below the
    /// concurrency of a busy gateway: past it, connections are closed on release and every
    /// request pays a new TCP connection (measured: CPU per request ~2x at 256 connections).
    #[serde(default = "default_upstream_pool_size")]
    pub upstream_pool_size: usize,
    /// The response header naming the instance that served a request; `false` turns it off.
    #[serde(
        default = "default_upstream_header",
        deserialize_with = "de_upstream_header"
    )]
    pub upstream_header: Option<String>,
    pub pools: BTreeMap<String, PoolConfig>,
    /// Ordered routes; the first match wins.
    #[serde(default)]
    pub routes: Vec<RouteConfig>,
    /// Where requests that match no route go. Without it they are answered 404 / -32601.
    #[serde(default)]
    pub default_route: Option<DefaultRoute>,
    #[serde(default)]
    pub validation: Validation,
    #[serde(default)]
    pub limits: Limits,
    #[serde(default)]
    pub timeouts: Timeouts,
    #[serde(default)]
    pub retries: Retries,
    /// Keyed rate limits, checked in order; the first that refuses answers 429.
    #[serde(default)]
    pub rate_limits: Vec<RateLimitConfig>,
    #[serde(default)]
    pub metrics: MetricsConfig,
    #[serde(default)]
    pub shutdown: ShutdownConfig,
    /// Which browser origins may call the gateway (DNS-rebinding protection, spec §Security).
    #[serde(default)]
    pub origins: OriginsConfig,
    /// How often instance host names are resolved again (a Kubernetes Service or DNS change
    /// then needs no restart); `0s` resolves only at start and on reload.
    #[serde(default = "d_dns_refresh", with = "humantime_serde_compat")]
    pub dns_refresh: Duration,
    /// The shared tier: where `scope: global` rate limits keep their buckets.
    #[serde(default)]
    pub redis: Option<RedisConfig>,
    /// OAuth 2.1 resource server at the edge (see [`auth::AuthConfig`]); absent = no auth.
    #[serde(default)]
    pub auth: Option<auth::AuthConfig>,
    /// Requests in flight at once per route or tool; past it 503 (see `config::concurrency`).
    #[serde(default)]
    pub concurrency_limits: Vec<ConcurrencyLimitConfig>,
    /// MRTR flow tracking (see `config::flows`).
    #[serde(default)]
    pub flows: FlowsConfig,
    /// OpenTelemetry span export, off by default (see `config::flows`).
    #[serde(default)]
    pub tracing: TracingConfig,
    /// Per-client-connection buffers (see `config::connections`).
    #[serde(default)]
    pub connections: connections::ConnectionsConfig,
}

fn d_dns_refresh() -> Duration {
    Duration::from_secs(30)
}

/// A request that carries `Origin` must name an allowed one, or it gets 403. Requests without
/// `Origin` (every non-browser client) are not affected.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OriginsConfig {
    /// Allowed origins: exact (`https://app.example.com`) or a glob (`http://localhost:*`).
    /// Default: local origins only. `["*"]` allows any.
    #[serde(default = "default_origins")]
    pub allow: Vec<Pattern>,
}

impl Default for OriginsConfig {
    fn default() -> Self {
        OriginsConfig {
            allow: default_origins(),
        }
    }
}

fn default_origins() -> Vec<Pattern> {
    [
        "http://localhost",
        "http://localhost:*",
        "http://127.0.0.1",
        "http://127.0.0.1:*",
        "http://[::1]",
        "http://[::1]:*",
    ]
    .iter()
    .flat_map(|o| [o.to_string(), o.replacen("http://", "https://", 1)])
    .map(|o| Pattern::parse(&o))
    .collect()
}

/// What SIGTERM does: stop accepting, let requests in flight finish, then stop.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShutdownConfig {
    /// How long requests in flight get to finish after SIGTERM (whole seconds, rounded up).
    #[serde(default = "d_grace", with = "humantime_serde_compat")]
    pub grace_period: Duration,
    /// After the grace period, how long the runtime gets to wind down before it is cut.
    #[serde(default = "d_wind_down", with = "humantime_serde_compat")]
    pub wind_down: Duration,
    /// The Unix socket the listeners are handed over on in a zero-downtime upgrade (default:
    /// in a directory private to this user, see `gateway::server::upgrade_socket`).
    #[serde(default)]
    pub upgrade_socket: Option<std::path::PathBuf>,
}

impl Default for ShutdownConfig {
    fn default() -> Self {
        ShutdownConfig {
            grace_period: d_grace(),
            wind_down: d_wind_down(),
            upgrade_socket: None,
        }
    }
}

fn d_grace() -> Duration {
    Duration::from_secs(10)
}
fn d_wind_down() -> Duration {
    Duration::from_secs(5)
}

/// One rate limit.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RateLimitConfig {
    /// Names the limit in metrics, logs and the 429 message.
    pub name: String,
    /// Which requests the limit covers (all, when empty).
    #[serde(rename = "match", default)]
    pub matcher: LimitMatch,
    /// What one bucket counts: any of route, method, name, principal, client_ip, header:<name>.
    /// Empty: one bucket for every request the limit covers.
    #[serde(default)]
    pub key: Vec<KeyPart>,
    /// Sustained rate: `N/s`, `N/m` or `N/h`.
    pub rate: Rate,
    /// Requests allowed at once above the sustained rate (default: N of the rate).
    #[serde(default)]
    pub burst: Option<u32>,
    /// Count what would be limited without refusing it.
    #[serde(default)]
    pub dry_run: bool,
    /// Most keys tracked at once in this replica; a new key past it evicts the least recently
    /// used one (for a global limit: the keys of its `on_store_error: local` fallback).
    #[serde(default = "default_max_keys")]
    pub max_keys: usize,
    /// `replica` (this process's buckets) or `global` (shared in Redis).
    #[serde(default)]
    pub scope: Scope,
    /// `scope: global` only: what to do when Redis does not answer (default `local`).
    #[serde(default)]
    pub on_store_error: Option<OnStoreError>,
}

impl RateLimitConfig {
    pub fn quota(&self) -> governor::Quota {
        let n = std::num::NonZeroU32::new(self.rate.count).expect("validated: rate count > 0");
        let q = match self.rate.per {
            Per::Second => governor::Quota::per_second(n),
            Per::Minute => governor::Quota::per_minute(n),
            Per::Hour => governor::Quota::per_hour(n),
        };
        match self.burst.and_then(std::num::NonZeroU32::new) {
            Some(b) => q.allow_burst(b),
            None => q,
        }
    }
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct LimitMatch {
    /// A route name (see `routes[].name`; `default` for the default route).
    #[serde(default)]
    pub route: Option<String>,
    #[serde(default)]
    pub method: Option<Pattern>,
    #[serde(default)]
    pub name: Option<Pattern>,
}

/// One part of a rate-limit key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyPart {
    Route,
    Method,
    Name,
    Principal,
    ClientIp,
    Header(http::HeaderName),
    /// A claim of the verified token (`claim:<name>`; needs `auth`).
    Claim(String),
}

impl<'de> Deserialize<'de> for KeyPart {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Ok(match s.as_str() {
            "route" => KeyPart::Route,
            "method" => KeyPart::Method,
            "name" => KeyPart::Name,
            "principal" => KeyPart::Principal,
            "client_ip" => KeyPart::ClientIp,
            other if other.starts_with("claim:") && other.len() > 6 => {
                KeyPart::Claim(other[6..].trim().to_string())
            }
            other => match other.strip_prefix("header:") {
                Some(h) => KeyPart::Header(http::HeaderName::from_bytes(h.trim().as_bytes()).map_err(|_| {
                    serde::de::Error::custom(format!("key: {h:?} is not a valid header name"))
                })?),
                None => {
                    return Err(serde::de::Error::custom(format!(
                        "key: unknown part {other:?}; use route, method, name, principal, client_ip, header:<name> or claim:<name>"
                    )))
                }
            },
        })
    }
}

impl fmt::Display for KeyPart {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            KeyPart::Route => f.write_str("route"),
            KeyPart::Method => f.write_str("method"),
            KeyPart::Name => f.write_str("name"),
            KeyPart::Principal => f.write_str("principal"),
            KeyPart::ClientIp => f.write_str("client_ip"),
            KeyPart::Header(h) => write!(f, "header:{h}"),
            KeyPart::Claim(c) => write!(f, "claim:{c}"),
        }
    }
}

/// A sustained rate, `N/s`, `N/m` or `N/h`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rate {
    pub count: u32,
    pub per: Per,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Per {
    Second,
    Minute,
    Hour,
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        let per = match self.per {
            Per::Second => "s",
            Per::Minute => "m",
            Per::Hour => "h",
        };
        write!(f, "{}/{per}", self.count)
    }
}

impl<'de> Deserialize<'de> for Rate {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        let bad = || {
            serde::de::Error::custom(format!(
                "rate: {s:?} is not a rate; write N/s, N/m or N/h, e.g. 100/s"
            ))
        };
        let (n, per) = s.split_once('/').ok_or_else(bad)?;
        let count: u32 = n.trim().parse().map_err(|_| bad())?;
        if count == 0 {
            return Err(serde::de::Error::custom(
                "rate: the count must be at least 1",
            ));
        }
        let per = match per.trim() {
            "s" | "sec" | "second" => Per::Second,
            "m" | "min" | "minute" => Per::Minute,
            "h" | "hour" => Per::Hour,
            _ => return Err(bad()),
        };
        Ok(Rate { count, per })
    }
}

/// Prometheus metrics.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetricsConfig {
    /// How many distinct `name` label values (tool names, prompt names, resource URIs) are kept
    /// besides the names in the config; the rest are counted as `_other`.
    #[serde(default = "default_name_labels")]
    pub name_label_limit: usize,
}

impl Default for MetricsConfig {
    fn default() -> Self {
        MetricsConfig {
            name_label_limit: default_name_labels(),
        }
    }
}

fn default_name_labels() -> usize {
    100
}

fn default_max_keys() -> usize {
    100_000
}

/// Which failed requests are tried again on another instance.
#[derive(Debug, Clone, Deserialize)]
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

#[derive(Debug, Clone, Deserialize)]
#[serde(from = "tls::ListenFile")]
pub struct Listen {
    /// The MCP listener.
    pub mcp: SocketAddr,
    /// The admin listener (`/healthz`, `/readyz`, `/metrics`); `null` turns it off.
    pub admin: Option<SocketAddr>,
    /// TLS, h2c and further MCP listeners ([`tls`]).
    pub tls: tls::Listeners,
}

impl Default for Listen {
    fn default() -> Self {
        Listen {
            mcp: default_mcp_addr(),
            admin: default_admin_addr(),
            tls: tls::Listeners::default(),
        }
    }
}

impl From<tls::ListenFile> for Listen {
    fn from(f: tls::ListenFile) -> Self {
        Listen {
            mcp: f.mcp.address,
            admin: f.admin.as_ref().map(|a| a.address),
            tls: tls::Listeners {
                mcp: f.mcp.options,
                extra: f.extra,
                admin: f.admin.map(|a| a.options).unwrap_or_default(),
            },
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PoolConfig {
    /// `host:port` of each instance.
    pub instances: Vec<String>,
    #[serde(default)]
    pub balance: Balance,
    /// With `balance: hash`: `mcp-name` (default), `principal` or `header:<name>`.
    #[serde(default)]
    pub hash_key: Option<HashKey>,
    /// Active health checks.
    #[serde(default)]
    pub health: HealthConfig,
    /// Passive ejection of instances that fail requests.
    #[serde(default)]
    pub ejection: EjectionConfig,
    /// Connect to the instances over TLS ([`tls::UpstreamTls`]).
    #[serde(default)]
    pub tls: Option<tls::UpstreamTls>,
    /// HTTP version to the instances: h1 (default), h2, auto (ALPN, with tls).
    #[serde(default)]
    pub http: tls::UpstreamHttp,
}

/// How instances are probed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
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

#[derive(Debug, Clone, Deserialize, PartialEq)]
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

#[derive(Debug, Clone, Deserialize, PartialEq)]
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

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Balance {
    #[default]
    RoundRobin,
    /// Consistent hashing (ketama): adding or removing one of N instances moves about 1/N keys.
    Hash,
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
    /// checked against the argument (G34).
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

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouteConfig {
    /// A label for logs, metrics and `check` (default `route-N`).
    #[serde(default)]
    pub name: Option<String>,
    #[serde(rename = "match", default)]
    pub matcher: Match,
    pub pool: String,
    #[serde(default)]
    pub validation: Option<Validation>,
    /// Per-route auth settings (needs `auth`).
    #[serde(default)]
    pub auth: Option<auth::RouteAuth>,
    /// The route's edge cache (absent: on, with the defaults of [`CacheConfig`]).
    #[serde(default)]
    pub cache: Option<CacheConfig>,
}

/// What a route matches: `Mcp-Method` and `Mcp-Name` patterns (exact, `prefix*` or glob with
/// `*` and `?`). An absent pattern matches anything; a `name` pattern never matches a request
/// whose method carries no `Mcp-Name`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Match {
    #[serde(default)]
    pub method: Option<Pattern>,
    #[serde(default)]
    pub name: Option<Pattern>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DefaultRoute {
    pub pool: String,
    #[serde(default)]
    pub validation: Option<Validation>,
    /// Per-route auth settings (needs `auth`).
    #[serde(default)]
    pub auth: Option<auth::RouteAuth>,
    /// The default route's edge cache (absent: on, with the defaults of [`CacheConfig`]).
    #[serde(default)]
    pub cache: Option<CacheConfig>,
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Validation {
    /// The share of requests whose headers are checked against the body (0.0 to 1.0). The rest
    /// take the header-only fast path: routed on the claimed headers, body forwarded unread.
    #[serde(default = "default_sample", deserialize_with = "de_sample")]
    pub sample: f64,
}

impl Default for Validation {
    fn default() -> Self {
        Validation { sample: 1.0 }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    /// Largest request body accepted (bytes); larger ones get 413.
    #[serde(default = "default_max_body")]
    pub max_body_bytes: usize,
    /// Largest total size of the request headers (bytes); larger ones get 431.
    #[serde(default = "default_max_header")]
    pub max_header_bytes: usize,
    /// Request bodies held in memory across all connections at once (bytes): past it, new bodies
    /// get 503 / -31007 with `Retry-After` instead of exhausting memory with slow uploads.
    #[serde(default = "default_max_held")]
    pub max_held_bytes: usize,
}

fn default_max_held() -> usize {
    256 * 1024 * 1024
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_body_bytes: default_max_body(),
            max_held_bytes: default_max_held(),
            max_header_bytes: default_max_header(),
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Timeouts {
    /// Connecting to an instance.
    #[serde(default = "d_connect", with = "humantime_serde_compat")]
    pub connect: Duration,
    /// Longest wait for the next bytes of an upstream response (for SSE: the gap between events).
    #[serde(default = "d_upstream_read", with = "humantime_serde_compat")]
    pub upstream_read: Duration,
    /// Longest wait to write to an instance.
    #[serde(default = "d_upstream_write", with = "humantime_serde_compat")]
    pub upstream_write: Duration,
    /// Longest wait for the next bytes of a client's request body (slow clients are cut off).
    #[serde(default = "d_downstream_read", with = "humantime_serde_compat")]
    pub downstream_read: Duration,
    /// Longest wait to write to a client that stopped reading (e.g. an SSE stream nobody
    /// drains); then the request is dropped and its upstream stream closed.
    #[serde(default = "d_downstream_write", with = "humantime_serde_compat")]
    pub downstream_write: Duration,
    /// How long an idle upstream connection is kept for reuse.
    #[serde(default = "d_idle", with = "humantime_serde_compat")]
    pub upstream_idle: Duration,
    /// How long an idle client keep-alive connection is kept open between requests.
    #[serde(default = "d_client_idle", with = "humantime_serde_compat")]
    pub client_idle: Duration,
    /// The longest a client may take to send its whole request body, however it trickles
    /// (`downstream_read` bounds each single wait); then it gets 408 / -31005.
    #[serde(default = "d_request_body", with = "humantime_serde_compat")]
    pub request_body: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            connect: d_connect(),
            upstream_read: d_upstream_read(),
            upstream_write: d_upstream_write(),
            downstream_read: d_downstream_read(),
            downstream_write: d_downstream_write(),
            upstream_idle: d_idle(),
            request_body: d_request_body(),
            client_idle: d_client_idle(),
        }
    }
}

fn default_endpoint() -> String {
    crate::mcp::DEFAULT_ENDPOINT.to_string()
}
fn default_threads() -> usize {
    1
}
fn default_upstream_pool_size() -> usize {
    1024
}
fn default_upstream_header() -> Option<String> {
    Some(crate::mcp::header::DEFAULT_UPSTREAM_HEADER.to_string())
}
fn default_mcp_addr() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 8080))
}
fn default_admin_addr() -> Option<SocketAddr> {
    Some(SocketAddr::from(([127, 0, 0, 1], 9090)))
}
fn default_sample() -> f64 {
    1.0
}
fn default_max_body() -> usize {
    1024 * 1024
}
fn default_max_header() -> usize {
    16 * 1024
}
fn d_connect() -> Duration {
    Duration::from_secs(2)
}
fn d_upstream_read() -> Duration {
    Duration::from_secs(60)
}
fn d_upstream_write() -> Duration {
    Duration::from_secs(10)
}
fn d_downstream_write() -> Duration {
    Duration::from_secs(30)
}
fn d_downstream_read() -> Duration {
    Duration::from_secs(10)
}
fn d_client_idle() -> Duration {
    Duration::from_secs(60)
}
fn d_request_body() -> Duration {
    Duration::from_secs(30)
}
fn d_idle() -> Duration {
    Duration::from_secs(60)
}

fn de_sample<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    let v = f64::deserialize(d)?;
    if (0.0..=1.0).contains(&v) {
        Ok(v)
    } else {
        Err(serde::de::Error::custom(format!(
            "validation.sample must be between 0.0 (never check) and 1.0 (check every request), got {v}"
        )))
    }
}

fn de_upstream_header<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum V {
        Off(bool),
        Name(String),
    }
    match V::deserialize(d)? {
        V::Off(false) => Ok(None),
        V::Off(true) => Ok(default_upstream_header()),
        V::Name(n) if n.is_empty() => Ok(None),
        V::Name(n) => http::HeaderName::from_bytes(n.as_bytes())
            .map(|h| Some(h.to_string()))
            .map_err(|_| {
                serde::de::Error::custom(format!(
                    "upstream_header: {n:?} is not a valid header name (or use false)"
                ))
            }),
    }
}

/// Parse a humane duration for the command line: `500ms`, `2s`, `10m`, `1h 30m`, or plain
/// seconds (`2`).
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    if let Ok(secs) = t.parse::<u64>() {
        return Ok(Duration::from_secs(secs));
    }
    humantime::parse_duration(t)
        .map_err(|e| format!("{s:?} is not a duration ({e}); write e.g. 500ms, 2s, 10m"))
}

/// Durations as humane strings: `500ms`, `2s`, `10m`, `1h 30m`.
mod humantime_serde_compat {
    use serde::{Deserialize, Deserializer};
    use std::time::Duration;

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let s = String::deserialize(d)?;
        super::parse_duration(&s).map_err(serde::de::Error::custom)
    }
}

/// A config error: where and what, written for a person.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    pub file: String,
    pub line: Option<usize>,
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self.line {
            Some(l) => write!(f, "{}:{}: {}", self.file, l, self.message),
            None => write!(f, "{}: {}", self.file, self.message),
        }
    }
}

impl std::error::Error for ConfigError {}

/// The default config shipped at the repository root, embedded for `mcp-edge demo`.
pub const EMBEDDED_DEFAULT: &str = include_str!("../../gateway.yaml");

impl Config {
    /// Load and validate a file.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
            file: file.clone(),
            line: None,
            message: format!("cannot read the config file: {e}"),
        })?;
        Self::parse(&text, &file)
    }

    /// Parse and validate YAML text; `file` names it in errors.
    pub fn parse(text: &str, file: &str) -> Result<Config, ConfigError> {
        let cfg: Config = serde_yaml::from_str(text).map_err(|e| {
            let mut message = e.to_string();
            // The message ends with " at line L column C"; the line goes up front instead.
            if let Some(i) = message.rfind(" at line ") {
                message.truncate(i);
            }
            ConfigError {
                file: file.to_string(),
                line: e.location().map(|l| l.line()),
                message,
            }
        })?;
        cfg.validate(text, file)?;
        Ok(cfg)
    }

    fn validate(&self, text: &str, file: &str) -> Result<(), ConfigError> {
        let err = |line: Option<usize>, message: String| ConfigError {
            file: file.to_string(),
            line,
            message,
        };
        if !self.endpoint.starts_with('/') {
            return Err(err(
                line_of(text, "endpoint", &self.endpoint),
                format!(
                    "endpoint: {:?} must be a path starting with '/', e.g. /mcp",
                    self.endpoint
                ),
            ));
        }
        if self.threads == 0 {
            return Err(err(
                line_of(text, "threads", "0"),
                "threads: must be at least 1".into(),
            ));
        }
        if self.pools.is_empty() {
            return Err(err(
                line_of(text, "pools", ""),
                "pools: define at least one pool with instances".into(),
            ));
        }
        for (name, pool) in &self.pools {
            if pool.instances.is_empty() {
                return Err(err(
                    line_of(text, name, ""),
                    format!("pools.{name}.instances: list at least one instance as host:port"),
                ));
            }
            for inst in &pool.instances {
                if inst
                    .to_socket_addrs()
                    .map(|mut a| a.next().is_none())
                    .unwrap_or(true)
                {
                    return Err(err(line_of(text, "", inst), format!(
                        "pools.{name}.instances: {inst:?} is not a host:port that resolves (write e.g. 127.0.0.1:7001 or backend:7001)"
                    )));
                }
            }
            let h = &pool.health;
            if h.check != HealthCheckKind::Off && (h.interval.is_zero() || h.timeout.is_zero()) {
                return Err(err(
                    line_of(text, "interval", "0"),
                    format!(
                        "pools.{name}.health: interval and timeout must be above 0s (0s would \
                         probe without pause); use e.g. `interval: 2s`, or `check: off`"
                    ),
                ));
            }
            if pool.hash_key.is_some() && pool.balance != Balance::Hash {
                return Err(err(line_of(text, "hash_key", ""), format!(
                    "pools.{name}.hash_key: only used with `balance: hash`; add it or remove hash_key"
                )));
            }
        }
        let known = || self.pools.keys().cloned().collect::<Vec<_>>().join(", ");
        let caches = self
            .routes
            .iter()
            .enumerate()
            .map(|(i, r)| (format!("routes[{i}]"), r.cache));
        let caches = caches.chain(
            self.default_route
                .iter()
                .map(|d| ("default_route".to_string(), d.cache)),
        );
        for (at, c) in caches {
            if let Some(Err((key, value, message))) = c.map(|c| c.check(&at)) {
                return Err(err(line_of(text, key, &value), message));
            }
        }
        for (i, r) in self.routes.iter().enumerate() {
            if let Some(v) = r.validation.filter(|v| v.sample < self.validation.sample) {
                return Err(err(
                    line_of(text, "sample", &v.sample.to_string()),
                    format!(
                        "routes[{i}].validation.sample: {} is below validation.sample {}. A \
                         client picks its route by what its headers claim, so a route checked \
                         less often would let a spoofer choose the weaker check; a route may \
                         only raise the share. Lower validation.sample instead",
                        v.sample, self.validation.sample
                    ),
                ));
            }
            if !self.pools.contains_key(&r.pool) {
                return Err(err(line_of(text, "pool", &r.pool), format!(
                    "routes[{i}].pool: no pool named {:?}; defined pools: {}. Add it under pools: or use one of those",
                    r.pool,
                    known()
                )));
            }
        }
        if let Some(d) = &self.default_route {
            if let Some(v) = d.validation.filter(|v| v.sample < self.validation.sample) {
                return Err(err(
                    line_of(text, "sample", &v.sample.to_string()),
                    format!(
                        "default_route.validation.sample: {} is below validation.sample {}; a \
                         route may only raise the share of checked requests",
                        v.sample, self.validation.sample
                    ),
                ));
            }
            if !self.pools.contains_key(&d.pool) {
                return Err(err(
                    line_of(text, "pool", &d.pool),
                    format!(
                        "default_route.pool: no pool named {:?}; defined pools: {}",
                        d.pool,
                        known()
                    ),
                ));
            }
        }
        let route_names: Vec<String> = self
            .routes
            .iter()
            .enumerate()
            .map(|(i, r)| route_name(r, i))
            .chain(std::iter::once("default".to_string()))
            .collect();
        for (i, l) in self.rate_limits.iter().enumerate() {
            if let Some(r) = &l.matcher.route {
                if !route_names.contains(r) {
                    return Err(err(
                        line_of(text, "route", r),
                        format!(
                            "rate_limits[{i}].match.route: no route named {r:?}; routes: {}",
                            route_names.join(", ")
                        ),
                    ));
                }
            }
            if l.max_keys == 0 {
                return Err(err(
                    line_of(text, "max_keys", ""),
                    format!("rate_limits[{i}].max_keys: must be at least 1"),
                ));
            }
            if self.rate_limits[..i].iter().any(|o| o.name == l.name) {
                return Err(err(
                    line_of(text, "name", &l.name),
                    format!(
                        "rate_limits[{i}].name: {:?} is used twice; limit names must be unique",
                        l.name
                    ),
                ));
            }
        }
        if let Err((key, message)) = redis::validate(self.redis.as_ref(), &self.rate_limits) {
            return Err(err(line_of(text, key, ""), message));
        }
        tls::check_listeners(&self.listen.tls, self.listen.mcp, self.listen.admin)
            .and_then(|()| {
                self.pools
                    .iter()
                    .try_for_each(|(n, p)| tls::check_pool(n, p.tls.as_ref(), p.http))
            })
            .map_err(|(key, msg)| {
                let leaf = tls::leaf_key(&key);
                err(line_of(text, leaf, ""), format!("{key}: {msg}"))
            })?;
        self.validate_auth(text, file)?;
        concurrency::validate(&self.concurrency_limits, &route_names, text, file)?;
        flows::validate(&self.flows, &self.tracing, text, file)?;
        connections::validate(&self.connections, text, file)?;
        if self.limits.max_body_bytes == 0 {
            return Err(err(
                line_of(text, "max_body_bytes", ""),
                "limits.max_body_bytes: must be at least 1".into(),
            ));
        }
        Ok(())
    }

    /// The `auth:` section, and the keys elsewhere that need it.
    fn validate_auth(&self, text: &str, file: &str) -> Result<(), ConfigError> {
        let needs_auth = self
            .rate_limits
            .iter()
            .any(|l| l.key.iter().any(|k| matches!(k, KeyPart::Claim(_))))
            || self
                .pools
                .values()
                .any(|p| matches!(p.hash_key, Some(HashKey::Claim(_))))
            || self.routes.iter().any(|r| r.auth.is_some())
            || self
                .default_route
                .as_ref()
                .is_some_and(|d| d.auth.is_some());
        match &self.auth {
            Some(a) => {
                let pools: Vec<&str> = self.pools.keys().map(String::as_str).collect();
                a.validate(&pools, |k, v| line_of(text, k, v), file)
            }
            None if needs_auth => Err(ConfigError {
                file: file.to_string(),
                line: line_of(text, "", "claim:").or_else(|| line_of(text, "auth", "")),
                message: "claim:<name> keys and routes[].auth need an auth: section (claims come from verified tokens)".into(),
            }),
            None => Ok(()),
        }
    }

    /// The route table as `mcp-edge check` prints it.
    pub fn describe(&self) -> String {
        let mut out = String::new();
        let admin = self
            .listen
            .admin
            .map_or("off".to_string(), |a| a.to_string());
        let _ = writeln!(
            out,
            "listen    mcp {} (POST {})   admin {admin}",
            self.listen.mcp, self.endpoint
        );
        let _ = writeln!(
            out,
            "threads   {} (work stealing {})",
            self.threads,
            if self.work_stealing { "on" } else { "off" }
        );
        if let Some(a) = &self.auth {
            out.push_str(&a.describe());
        }
        let origins: Vec<String> = self.origins.allow.iter().map(|p| p.to_string()).collect();
        let _ = writeln!(
            out,
            "origins   requests with an Origin header must match: {}",
            origins.join(" ")
        );
        let _ = writeln!(
            out,
            "upstream header  {}",
            self.upstream_header.as_deref().unwrap_or("off")
        );
        let _ = writeln!(out, "\npools");
        for (name, p) in &self.pools {
            let policy = match p.balance {
                Balance::RoundRobin => "round_robin".to_string(),
                Balance::Hash => {
                    format!("hash on {}", p.hash_key.clone().unwrap_or(HashKey::McpName))
                }
            };
            let _ = writeln!(out, "  {name:<12} {policy:<24} {}", p.instances.join(", "));
            let h = &p.health;
            let check = match h.check {
                HealthCheckKind::Mcp => format!("server/discover every {:?}", h.interval),
                HealthCheckKind::Tcp => format!("TCP connect every {:?}", h.interval),
                HealthCheckKind::Off => "no active checks".to_string(),
            };
            let _ = writeln!(
                out,
                "  {:<12} health: {check}; eject after {} failures",
                "", p.ejection.consecutive_failures
            );
        }
        let _ = writeln!(out, "\nroutes (first match wins)");
        let _ = writeln!(
            out,
            "  {:<4} {:<16} {:<20} {:<24} {:<12} check",
            "#", "route", "method", "name", "pool"
        );
        let pat = |p: &Option<Pattern>| p.as_ref().map_or("*".to_string(), |p| p.to_string());
        for (i, r) in self.routes.iter().enumerate() {
            let sample = r.validation.unwrap_or(self.validation).sample;
            let _ = writeln!(
                out,
                "  {:<4} {:<16} {:<20} {:<24} {:<12} {}",
                i + 1,
                route_name(r, i),
                pat(&r.matcher.method),
                pat(&r.matcher.name),
                r.pool,
                describe_sample(sample)
            );
        }
        match &self.default_route {
            Some(d) => {
                let sample = d.validation.unwrap_or(self.validation).sample;
                let _ = writeln!(
                    out,
                    "  {:<4} {:<16} {:<20} {:<24} {:<12} {}",
                    "-",
                    "default",
                    "*",
                    "*",
                    d.pool,
                    describe_sample(sample)
                );
            }
            None => {
                let _ = writeln!(
                    out,
                    "  -    (no default route: unmatched requests get 404 / -32601)"
                );
            }
        }
        let caches = self
            .routes
            .iter()
            .enumerate()
            .map(|(i, r)| (route_name(r, i), r.cache));
        let caches = caches.chain(
            self.default_route
                .iter()
                .map(|d| ("default".to_string(), d.cache)),
        );
        for (name, c) in caches {
            let _ = writeln!(out, "{}", cache::describe(&name, &c.unwrap_or_default()));
        }
        let _ = writeln!(
            out,
            "\nlimits    body {} bytes, headers {} bytes",
            self.limits.max_body_bytes, self.limits.max_header_bytes
        );
        let _ = writeln!(
            out,
            "retries   a request that could not connect is tried on up to {} other instances",
            self.retries.connect_failure
        );
        if !self.rate_limits.is_empty() {
            let _ = writeln!(
                out,
                "\nrate limits (checked in order; the first that refuses answers 429)"
            );
            for l in &self.rate_limits {
                let key: Vec<String> = l.key.iter().map(|k| k.to_string()).collect();
                let key = if key.is_empty() {
                    "one bucket".to_string()
                } else {
                    key.join("+")
                };
                let m = &l.matcher;
                let scope = format!(
                    "route {} method {} name {}",
                    m.route.as_deref().unwrap_or("*"),
                    pat(&m.method),
                    pat(&m.name)
                );
                let burst = l.burst.map_or(String::new(), |b| format!(" burst {b}"));
                let dry = if l.dry_run { " (dry run)" } else { "" };
                let _ = writeln!(
                    out,
                    "  {:<16} {}{burst} per {key}; {scope}{dry}; {}",
                    l.name,
                    l.rate,
                    redis::describe_scope(l, self.redis.as_ref())
                );
            }
        }
        if let Some(r) = &self.redis {
            let _ = writeln!(out, "{}", redis::describe(r));
        }
        let t = &self.timeouts;
        let _ = writeln!(
            out,
            "timeouts  connect {:?}, upstream read {:?}, upstream write {:?}, client body {:?}, idle {:?}",
            t.connect, t.upstream_read, t.upstream_write, t.downstream_read, t.upstream_idle
        );
        let _ = writeln!(
            out,
            "          client write {:?}; shutdown: grace {:?}, wind down {:?}",
            t.downstream_write, self.shutdown.grace_period, self.shutdown.wind_down
        );
        out
    }
}

/// The label of route `i`.
pub fn route_name(r: &RouteConfig, i: usize) -> String {
    r.name.clone().unwrap_or_else(|| format!("route-{}", i + 1))
}

fn describe_sample(s: f64) -> String {
    if s >= 1.0 {
        "every request".into()
    } else if s <= 0.0 {
        "off (header-only)".into()
    } else {
        format!("{:.0}% sampled", s * 100.0)
    }
}

/// The 1-based line of the first `key: …value…` (or list item containing `value`) in `text`.
/// Used for errors found after parsing (a dangling pool reference), where the YAML parser can no
/// longer say where a value came from.
fn line_of(text: &str, key: &str, value: &str) -> Option<usize> {
    text.lines()
        .position(|l| {
            let t = l.trim_start().trim_start_matches("- ");
            // The key starts the line, or sits inside a flow mapping (`{ sample: 0.1 }`).
            let key_ok = key.is_empty()
                || t.starts_with(&format!("{key}:"))
                || [" ", "{", ","]
                    .iter()
                    .any(|p| l.contains(&format!("{p}{key}:")));
            key_ok && (value.is_empty() || l.contains(value))
        })
        .map(|i| i + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: &str = "pools:\n  default:\n    instances: [127.0.0.1:7001]\n";

    #[test]
    fn the_embedded_default_is_valid() {
        let c = Config::parse(EMBEDDED_DEFAULT, "gateway.yaml").unwrap();
        assert_eq!(c.listen.mcp.port(), 8080);
        assert_eq!(c.pools["default"].instances.len(), 3);
        assert!(c.describe().contains("default"));
    }

    #[test]
    fn defaults_fill_in() {
        let c = Config::parse(MIN, "t.yaml").unwrap();
        assert_eq!(c.endpoint, "/mcp");
        assert_eq!(c.limits.max_body_bytes, 1 << 20);
        assert_eq!(c.validation.sample, 1.0);
        assert_eq!(c.upstream_header.as_deref(), Some("x-mcp-edge-upstream"));
    }

    fn err(text: &str) -> ConfigError {
        Config::parse(text, "t.yaml").unwrap_err()
    }

    #[test]
    fn unknown_keys_name_the_line_and_the_key() {
        let e = err("pools:\n  default:\n    instances: [127.0.0.1:7001]\nroutes:\n  - match: {nmae: x}\n    pool: default\n");
        assert_eq!(e.line, Some(5), "{e}");
        assert!(
            e.message.contains("nmae") && e.message.contains("expected `method` or `name`"),
            "{e}"
        );
        let e = err(&format!("{MIN}listn:\n  mcp: 127.0.0.1:1\n"));
        assert_eq!(e.line, Some(4), "{e}");
        assert!(e.message.contains("listn"), "{e}");
    }

    #[test]
    fn bad_values_say_what_is_valid() {
        let e = err(&format!("{MIN}validation:\n  sample: 2\n"));
        assert!(e.message.contains("between 0.0"), "{e}");
        assert!(e.line.is_some());
        let e = err("pools:\n  default:\n    instances: [127.0.0.1:7001]\n    balance: random\n");
        assert!(
            e.message.contains("round_robin") && e.message.contains("hash"),
            "{e}"
        );
        assert_eq!(e.line, Some(4), "{e}");
        let e = err(&format!("{MIN}timeouts:\n  connect: soon\n"));
        assert!(e.message.contains("not a duration"), "{e}");
        let e = err("pools:\n  default:\n    instances: [127.0.0.1:7001]\n    balance: hash\n    hash_key: tenant\n");
        assert!(e.message.contains("header:<name>"), "{e}");
    }

    #[test]
    fn dangling_pool_reference_names_its_line() {
        let e = err(&format!(
            "{MIN}routes:\n  - match: {{method: tools/call}}\n    pool: tools\n"
        ));
        assert_eq!(e.line, Some(6), "{e}");
        assert!(
            e.message.contains("routes[0].pool") && e.message.contains("defined pools: default"),
            "{e}"
        );
    }

    #[test]
    fn empty_and_bad_instances() {
        let e = err("pools:\n  default:\n    instances: []\n");
        assert!(e.message.contains("at least one instance"), "{e}");
        let e = err("pools:\n  default:\n    instances: [nowhere]\n");
        assert!(e.message.contains("host:port"), "{e}");
        assert_eq!(e.line, Some(3));
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("10m"), Ok(Duration::from_secs(600)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("45"), Ok(Duration::from_secs(45)));
        assert!(parse_duration("10 parsecs").is_err());
        assert!(parse_duration("m").is_err());
        assert!(parse_duration("").is_err());
    }

    #[test]
    fn upstream_header_can_be_turned_off() {
        let c = Config::parse(&format!("{MIN}upstream_header: false\n"), "t").unwrap();
        assert_eq!(c.upstream_header, None);
        let c = Config::parse(&format!("{MIN}upstream_header: x-served-by\n"), "t").unwrap();
        assert_eq!(c.upstream_header.as_deref(), Some("x-served-by"));
    }
}
