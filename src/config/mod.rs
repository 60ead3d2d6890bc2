//! `gateway.yaml`: loading a file into [`Config`] (the root of the schema), and [`ConfigError`].
//!
//! Loading never half-succeeds: a file with an unknown key, a bad value or a dangling reference
//! is refused as a whole with an error naming the file, the line, the key and what would be valid.
//!
//! One file per topic, each owning its section's types and defaults: `listen` (listeners,
//! origins), `pools` (instances, balancing, health, ejection, retries; their `credentials`
//! section is the credentials component's own, `crate::credentials::config`; their
//! `concurrency` is `adaptive`), `routes` (route table, default route, validation share),
//! `rate_limits`, `limits` (sizes, metrics label bound), `timeouts` (and shutdown), `tls`,
//! `auth`, `cache`, `concurrency`, `flows` (and tracing), `redis`, `federation`, `audit`,
//! `balance` (a pool's `outliers`). Across topics: `validate` (cross-key checks with positions)
//! and `describe` (what `mcp-edge check` prints); durations are read by `crate::values`. A
//! gateway component's section is the `config.rs` of its folder (`src/gateway/cache/`,
//! `src/gateway/federation/`, `src/gateway/balance/`, `src/gateway/rate_limits/`,
//! `src/gateway/concurrency/`), included here by path: it is a module of the config, which
//! never imports the gateway.

use serde::{Deserialize, Deserializer};
use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;
use std::time::Duration;

pub(crate) mod audit;
pub(crate) mod redis;
pub(crate) use redis::{OnStoreError, RedisConfig, Scope};
pub(crate) mod auth;
mod auth_keys;
#[path = "../gateway/cache/config.rs"]
pub(crate) mod cache;
pub(crate) mod tls;
pub(crate) use cache::CacheConfig;
pub(crate) mod adaptive;
#[path = "../gateway/balance/config.rs"]
pub(crate) mod balance;
#[path = "../gateway/concurrency/config.rs"]
pub(crate) mod concurrency;
pub(crate) mod connections;
#[path = "../gateway/federation/config.rs"]
pub(crate) mod federation;
pub(crate) mod flows;
pub(crate) mod legacy;
pub(crate) use concurrency::ConcurrencyLimitConfig;
pub(crate) use connections::UpstreamLeg;
pub(crate) use federation::{Collisions, FederatedEndpoint, FederationConfig};
pub(crate) use flows::{FlowsConfig, TracingConfig};
mod describe;
mod limits;
mod listen;
pub(crate) mod mrtr;
mod pattern;
pub(crate) mod pins;
pub(crate) mod policy;
pub(crate) mod pools;
mod positions;
#[path = "../gateway/rate_limits/config.rs"]
mod rate_limits;
mod routes;
mod schema;
mod timeouts;
mod validate;
pub(crate) use crate::values::humantime_serde_compat;
pub(crate) use crate::values::parse_duration;
pub(crate) use limits::{Limits, MetricsConfig};
pub(crate) use listen::{Listen, OriginsConfig};
pub(crate) use mrtr::RetryLanding;
pub(crate) use pattern::Pattern;
pub(crate) use pools::{
    Balance, EjectionConfig, HashKey, HealthCheckKind, HealthConfig, PoolConfig, Retries,
};
pub(crate) use positions::{Pos, Positions};
pub(crate) use rate_limits::{KeyPart, LimitMatch, Rate, RateLimitConfig};
pub use routes::RouteRef;
pub(crate) use routes::{route_name, DefaultRoute, Match, RouteConfig, Validation};
pub use schema::schema_json;
pub(crate) use timeouts::{ShutdownConfig, Timeouts};

/// The configuration of one gateway, as loaded and validated.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
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
    #[schemars(with = "schema::UpstreamHeader")]
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
    /// Per-client-connection buffers and parking (see `config::connections`).
    #[serde(default)]
    pub connections: connections::ConnectionsConfig,
    /// Endpoints that merge several different pools behind one path (see `config::federation`).
    #[serde(default)]
    pub federation: Option<FederationConfig>,
    /// A file holding the admin listener's bearer token: with it, `POST /-/reload` and
    /// `POST /-/cache/purge` need `Authorization: Bearer <token>` (read on start and reload).
    #[serde(default)]
    pub admin_token_file: Option<std::path::PathBuf>,
    /// Clients of the 2025 era: bridged (the default) or refused (see `config::legacy`).
    #[serde(default)]
    pub legacy: legacy::LegacyConfig,
    /// Rules over a call's arguments and the caller's claims, at the edge (see `config::policy`).
    #[serde(default)]
    pub argument_policy: Vec<policy::PolicyRule>,
    /// Pinned tool and prompt definitions: the pins file and first-sight rule (see
    /// `config::pins`; each pool opts in with `pools.<name>.pins`).
    #[serde(default)]
    pub pins: pins::PinsConfig,
    /// The audit trail: one record per call, read and get (see `config::audit`); off by default.
    #[serde(default)]
    pub audit: audit::AuditConfig,
}

fn d_dns_refresh() -> Duration {
    Duration::from_secs(30)
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

/// A config error: where and what, written for a person.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    pub file: String,
    /// 1-based line of the offending key or value.
    pub line: Option<usize>,
    /// 1-based column on that line.
    pub column: Option<usize>,
    pub message: String,
}

/// How a validation check names the offending key: its path (for the line and column) and the
/// message.
pub(crate) type ErrAt<'a> = dyn Fn(&str, String) -> ConfigError + 'a;

impl ConfigError {
    /// An error at `pos` (None: the file as a whole).
    pub(crate) fn at(file: &str, pos: Option<Pos>, message: impl Into<String>) -> ConfigError {
        ConfigError {
            file: file.to_string(),
            line: pos.map(|p| p.line),
            column: pos.map(|p| p.column),
            message: message.into(),
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match (self.line, self.column) {
            (Some(l), Some(c)) => write!(f, "{}:{l}:{c}: {}", self.file, self.message),
            (Some(l), None) => write!(f, "{}:{l}: {}", self.file, self.message),
            _ => write!(f, "{}: {}", self.file, self.message),
        }
    }
}

impl std::error::Error for ConfigError {}

/// The default config shipped at the repository root, embedded for `mcp-edge demo`.
pub(crate) const EMBEDDED_DEFAULT: &str = include_str!("../../gateway.yaml");

impl Config {
    /// The headers this config reads as keys: `header:<name>` in a rate limit's `key` or in a
    /// hash pool's `hash_key`, each once. A key must mean one thing to the gateway and to the
    /// upstream, so admission refuses a request that sends one of them twice or under a name
    /// that frameworks fold onto it ([`crate::mcp::header::key_header`]).
    pub(crate) fn key_headers(&self) -> Vec<http::HeaderName> {
        let limits = self.rate_limits.iter().flat_map(|l| &l.key);
        let limits = limits.filter_map(|k| match k {
            KeyPart::Header(h) => Some(h),
            _ => None,
        });
        // Validation allows a hash_key on `balance: hash` pools only.
        let pools = self.pools.values().filter_map(|p| match &p.hash_key {
            Some(HashKey::Header(h)) => Some(h),
            _ => None,
        });
        let mut names: Vec<http::HeaderName> = limits.chain(pools).cloned().collect();
        names.sort_by(|a, b| a.as_str().cmp(b.as_str()));
        names.dedup();
        names
    }

    /// Load and validate a file.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| {
            ConfigError::at(&file, None, format!("cannot read the config file: {e}"))
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
            let pos = e.location().map(|l| Pos {
                line: l.line(),
                column: l.column(),
            });
            ConfigError::at(file, pos, message)
        })?;
        let mut cfg = cfg;
        cfg.validate(&Positions::of(text), file)?;
        for p in cfg.pools.values_mut() {
            // A 2025-era server has no server/discover to probe without a session.
            if p.era.legacy_version().is_some() && p.health.check == HealthCheckKind::Mcp {
                p.health.check = HealthCheckKind::Tcp;
            }
        }
        Ok(cfg)
    }
}

#[cfg(test)]
mod tests;
