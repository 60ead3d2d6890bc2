//! Limit stage: keyed GCRA rate limits, checked on the claimed headers before the body is read.
//!
//! A limit's key is built from any of route, method, name (decoded `Mcp-Name`), principal (the
//! bearer token, hashed: the token is never stored), client IP or a named header. A
//! `scope: replica` limit (the default) keeps its buckets in this process ([`local`]: a bounded
//! LRU store under a per-process random hash key); a `scope: global` limit asks Redis
//! ([`store`]) with the same GCRA semantics, keyed by a SHA-256 of the limit and its key, and
//! follows its `on_store_error` policy when Redis cannot answer in time, behind a circuit
//! breaker ([`circuit`]).
//!
//! Requests with more than one `Authorization` header never get here: admission refuses them
//! (which one would name the principal is ambiguous), and so it does a `header:<name>` key sent
//! twice or under a name that folds onto it ([`crate::mcp::header::key_header`]).

pub(crate) mod circuit;
pub mod local;
pub mod store;

use governor::Quota;
use sha2::{Digest, Sha256};
use std::hash::Hasher;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use crate::auth::Identity;
use crate::config::Pattern;
use crate::config::{Config, KeyPart, OnStoreError, RateLimitConfig, Scope};
use crate::mcp::header::{bearer_token, key_header, KeyHeader};
use local::LocalLimiter;
use store::{GlobalStore, StoreMetrics};

/// The key of an ambiguous key header (a header value can hold no NUL, so no value is this).
const AMBIGUOUS: &[u8] = b"\0ambiguous";

/// How long `on_store_error: deny` asks a refused client to wait.
const DENY_RETRY: Duration = Duration::from_secs(1);

/// What a limit looks at.
pub struct LimitInput<'a> {
    pub route: &'a str,
    pub method: Option<&'a str>,
    pub name: Option<&'a str>,
    pub headers: &'a http::HeaderMap,
    pub client_ip: Option<IpAddr>,
    /// The caller verified by `auth` (then `principal` is its subject, never the raw token).
    pub identity: Option<&'a Identity>,
}

/// The verdict of one limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Allowed,
    /// Over the limit; try again after this long.
    Limited(Duration),
    /// Over the limit, but the limit only counts (`dry_run`).
    DryRunLimited,
    /// The request is not covered by this limit.
    NotApplicable,
}

/// A `scope: global` limit's link to Redis.
struct Global {
    store: Option<Arc<GlobalStore>>,
    policy: OnStoreError,
    key_prefix: String,
    /// GCRA emission interval and tolerance, in microseconds.
    t_us: u64,
    tau_us: u64,
}

/// One configured rate limit.
pub struct Limit {
    pub name: String,
    route: Option<String>,
    method: Option<Pattern>,
    mcp_name: Option<Pattern>,
    key: Vec<KeyPart>,
    dry_run: bool,
    /// The replica's buckets: the limit itself (`scope: replica`), or the `on_store_error:
    /// local` fallback of a global limit (at the rate divided by `redis.replicas`).
    local: LocalLimiter,
    global: Option<Global>,
}

impl Limit {
    /// A limit without a shared store (a global limit then always follows its policy).
    pub fn new(cfg: &RateLimitConfig) -> Limit {
        Limit::with_store(cfg, None)
    }

    pub(crate) fn with_store(cfg: &RateLimitConfig, store: Option<Arc<GlobalStore>>) -> Limit {
        let quota: Quota = cfg.quota();
        let (local_quota, global) = match cfg.scope {
            Scope::Replica => (quota, None),
            Scope::Global => {
                let replicas = store.as_ref().map_or(1, |s| s.config.replicas.max(1));
                let t_us = (quota.replenish_interval().as_micros() as u64).max(1);
                let burst = quota.burst_size().get();
                let global = Global {
                    key_prefix: store
                        .as_ref()
                        .map_or_else(String::new, |s| s.config.key_prefix.clone()),
                    store,
                    policy: cfg.on_store_error.unwrap_or_default(),
                    t_us,
                    tau_us: t_us * u64::from(burst - 1),
                };
                (scaled(quota, replicas), Some(global))
            }
        };
        Limit {
            name: cfg.name.clone(),
            route: cfg.matcher.route.clone(),
            method: cfg.matcher.method.clone(),
            mcp_name: cfg.matcher.name.clone(),
            key: cfg.key.clone(),
            dry_run: cfg.dry_run,
            local: LocalLimiter::new(local_quota, cfg.max_keys),
            global,
        }
    }

    fn applies(&self, i: &LimitInput) -> bool {
        let pat = |p: &Option<Pattern>, v: Option<&str>| match (p, v) {
            (None, _) => true,
            (Some(p), Some(v)) => p.matches(v),
            (Some(_), None) => false,
        };
        self.route.as_deref().is_none_or(|r| r == i.route)
            && pat(&self.method, i.method)
            && pat(&self.mcp_name, i.name)
    }

    /// Feed the request's key to `put`: each part tagged present/absent and length-prefixed,
    /// so that no two different keys give the same bytes.
    fn key_material(&self, i: &LimitInput, mut put: impl FnMut(&[u8])) {
        let mut field = |v: Option<&[u8]>| match v {
            None => put(&[0]),
            Some(b) => {
                put(&[1]);
                put(&(b.len() as u64).to_le_bytes());
                put(b);
            }
        };
        for part in &self.key {
            match part {
                KeyPart::Route => field(Some(i.route.as_bytes())),
                KeyPart::Method => field(i.method.map(str::as_bytes)),
                KeyPart::Name => field(i.name.map(str::as_bytes)),
                KeyPart::Principal => match i.identity {
                    Some(id) => field(Some(id.subject.as_bytes())),
                    None => field(bearer_token(i.headers).map(str::as_bytes)),
                },
                KeyPart::Claim(c) => {
                    let text = i.identity.and_then(|id| id.claim_text(c));
                    field(text.as_deref().map(str::as_bytes))
                }
                KeyPart::ClientIp => match i.client_ip {
                    Some(IpAddr::V4(a)) => field(Some(&a.octets())),
                    Some(IpAddr::V6(a)) => field(Some(&a.octets())),
                    None => field(None),
                },
                KeyPart::Header(n) => field(match key_header(i.headers, n.as_str()) {
                    KeyHeader::One(v) => Some(v),
                    KeyHeader::Absent => None,
                    // Admission refuses these; should one get here, it shares one bucket.
                    KeyHeader::Repeated | KeyHeader::Shadowed(_) => Some(AMBIGUOUS),
                }),
            }
        }
    }

    /// The 64-bit key of a request in this replica's store (under the process's random key).
    pub(crate) fn key_of(&self, i: &LimitInput) -> u64 {
        let mut h = local::keyed_hasher();
        self.key_material(i, |b| h.write(b));
        h.finish()
    }

    /// The Redis key of a request: the prefix and a SHA-256 of the limit's name and the key,
    /// the same on every replica (never a raw token).
    pub(crate) fn global_key(&self, prefix: &str, i: &LimitInput) -> String {
        let mut h = Sha256::new();
        h.update((self.name.len() as u64).to_le_bytes());
        h.update(self.name.as_bytes());
        self.key_material(i, |b| h.update(b));
        let digest = h.finalize();
        let mut key = String::with_capacity(prefix.len() + 32);
        key.push_str(prefix);
        crate::mcp::hex::push(&mut key, &digest[..16]);
        key
    }

    pub async fn check(&self, i: &LimitInput<'_>) -> Verdict {
        if !self.applies(i) {
            return Verdict::NotApplicable;
        }
        let decision = match &self.global {
            None => self.local.check(self.key_of(i)),
            Some(g) => {
                let answer = match &g.store {
                    Some(store) => {
                        let key = self.global_key(&g.key_prefix, i);
                        store.gcra(&key, g.t_us, g.tau_us).await
                    }
                    None => Err(store::StoreError::NotConnected),
                };
                match answer {
                    Ok(d) => d,
                    Err(_) => {
                        if let Some(store) = &g.store {
                            store.fallback(&self.name, g.policy);
                        }
                        match g.policy {
                            OnStoreError::Local => self.local.check(self.key_of(i)),
                            OnStoreError::Allow => Ok(()),
                            OnStoreError::Deny => Err(DENY_RETRY),
                        }
                    }
                }
            }
        };
        match decision {
            Ok(()) => Verdict::Allowed,
            Err(_) if self.dry_run => Verdict::DryRunLimited,
            Err(wait) => Verdict::Limited(wait),
        }
    }

    /// What this limit would decide for `i` now, without spending a token: `None` when it does
    /// not apply, or when its buckets live in Redis (`scope: global`; not peeked, so that
    /// explaining never costs a round trip or a token).
    pub(crate) fn peek(&self, i: &LimitInput<'_>) -> Option<Verdict> {
        if !self.applies(i) || self.global.is_some() {
            return None;
        }
        Some(match self.local.peek(self.key_of(i)) {
            Ok(()) => Verdict::Allowed,
            Err(_) if self.dry_run => Verdict::DryRunLimited,
            Err(wait) => Verdict::Limited(wait),
        })
    }

    #[cfg(test)]
    /// Live keys in this replica's store (for tests and metrics).
    pub(crate) fn live_keys(&self) -> usize {
        self.local.live_keys()
    }

    pub(crate) fn scope(&self) -> Scope {
        if self.global.is_some() {
            Scope::Global
        } else {
            Scope::Replica
        }
    }
}

/// `quota` shared by `replicas`: the rate and the burst divided (the burst rounded up).
fn scaled(quota: Quota, replicas: u32) -> Quota {
    if replicas <= 1 {
        return quota;
    }
    let period = quota.replenish_interval() * replicas;
    let burst = quota.burst_size().get().div_ceil(replicas).max(1);
    Quota::with_period(period)
        .expect("a non-zero period")
        .allow_burst(std::num::NonZeroU32::new(burst).expect("at least 1"))
}

/// What the limits share across a gateway's generations: the store's metrics and the Redis
/// client (kept on reload while `redis:` is unchanged).
#[derive(Default)]
pub struct Shared {
    metrics: Option<Arc<StoreMetrics>>,
    store: Option<Arc<GlobalStore>>,
}

impl Shared {
    pub(crate) fn new(
        config: &Config,
        previous: Option<&Shared>,
        registry: &prometheus::Registry,
    ) -> anyhow::Result<Shared> {
        let Some(redis) = &config.redis else {
            return Ok(Shared {
                metrics: previous.and_then(|p| p.metrics.clone()),
                store: None,
            });
        };
        let metrics = match previous.and_then(|p| p.metrics.clone()) {
            Some(m) => m,
            None => Arc::new(StoreMetrics::register(registry)?),
        };
        let kept = previous
            .and_then(|p| p.store.clone())
            .filter(|s| s.config == *redis);
        let store = match kept {
            Some(s) => s,
            None => Arc::new(GlobalStore::new(redis, metrics.clone())?),
        };
        Ok(Shared {
            metrics: Some(metrics),
            store: Some(store),
        })
    }

    /// The Redis client, when `redis:` is configured (also the one-time record of sealed
    /// states, `mrtr.seal.one_time: global`).
    pub(crate) fn store(&self) -> Option<Arc<GlobalStore>> {
        self.store.clone()
    }

    /// Build the limit of `cfg` on this shared tier.
    pub(crate) fn limit(&self, cfg: &RateLimitConfig) -> Limit {
        Limit::with_store(cfg, self.store.clone())
    }
}

/// The 429 answer for a request that limit `name` refused, and its `Retry-After` value.
pub(crate) fn refusal(name: &str, wait: Duration) -> (crate::mcp::Rejection, String) {
    let secs = retry_after_secs(wait);
    let rej = crate::mcp::Rejection::new(
        429,
        crate::mcp::codes::GATEWAY_RATE_LIMITED,
        "rate-limited",
        format!("Rate limit {name:?} exceeded; retry after {secs} s"),
    )
    .with_data(serde_json::json!({ "limit": name, "retryAfterSeconds": secs }));
    (rej, secs.to_string())
}

/// `Retry-After` in whole seconds (at least 1), rounded up.
pub(crate) fn retry_after_secs(wait: Duration) -> u64 {
    wait.as_nanos().div_ceil(1_000_000_000).max(1) as u64
}

#[cfg(test)]
mod tests;
