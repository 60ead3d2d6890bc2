//! Limit stage: keyed GCRA rate limits (governor), checked on the claimed headers before the
//! body is read.
//!
//! A limit's key is built from any of route, method, name (decoded `Mcp-Name`), principal (a
//! hash of the bearer token; the token is never stored), client IP or a named header, hashed to
//! 64 bits. Memory is bounded per limit: idle keys (whose bucket is full again) are evicted
//! about once a second, and once `max_keys` keys are live, further new keys share one overflow
//! bucket per shard until room frees up: a flood of distinct keys makes limiting stricter,
//! never looser, and never grows memory past the cap.

use governor::clock::{Clock, DefaultClock};
use governor::middleware::NoOpMiddleware;
use governor::nanos::Nanos;
use governor::state::keyed::{KeyedStateStore, ShrinkableKeyedStateStore};
use governor::state::StateStore;
use governor::{Quota, RateLimiter};
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::auth::Identity;
use crate::config::{KeyPart, RateLimitConfig};
use crate::gateway::route::Pattern;
use crate::mcp::header::bearer_token;

const SHARDS: usize = 16;

#[derive(Default)]
struct Shard {
    keys: HashMap<u64, Nanos>,
    /// The shared bucket of new keys that arrive while the shard is full.
    overflow: Option<Nanos>,
}

/// A keyed state store with a hard cap on the number of keys.
pub struct BoundedStore {
    shards: Vec<Mutex<Shard>>,
    cap_per_shard: usize,
}

impl BoundedStore {
    pub fn new(max_keys: usize) -> Self {
        BoundedStore {
            shards: (0..SHARDS).map(|_| Mutex::new(Shard::default())).collect(),
            cap_per_shard: max_keys.div_ceil(SHARDS).max(1),
        }
    }

    fn shard(&self, key: u64) -> std::sync::MutexGuard<'_, Shard> {
        // A poisoned shard only means a panic elsewhere mid-update; the map is still usable.
        self.shards[(key as usize) % SHARDS]
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }
}

impl StateStore for BoundedStore {
    type Key = u64;

    fn measure_and_replace<T, F, E>(&self, key: &u64, f: F) -> Result<T, E>
    where
        F: Fn(Option<Nanos>) -> Result<(T, Nanos), E>,
    {
        let mut shard = self.shard(*key);
        if let Some(tat) = shard.keys.get_mut(key) {
            let (out, new) = f(Some(*tat))?;
            *tat = new;
            return Ok(out);
        }
        if shard.keys.len() >= self.cap_per_shard {
            let (out, new) = f(shard.overflow)?;
            shard.overflow = Some(new);
            return Ok(out);
        }
        let (out, new) = f(None)?;
        shard.keys.insert(*key, new);
        Ok(out)
    }
}

impl ShrinkableKeyedStateStore<u64> for BoundedStore {
    fn retain_recent(&self, drop_below: Nanos) {
        for s in &self.shards {
            let mut s = s.lock().unwrap_or_else(|p| p.into_inner());
            s.keys.retain(|_, tat| *tat >= drop_below);
            if s.overflow.is_some_and(|t| t < drop_below) {
                s.overflow = None;
            }
        }
    }

    fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.lock().unwrap_or_else(|p| p.into_inner()).keys.len())
            .sum()
    }

    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

// `KeyedStateStore` is implemented for every `StateStore` whose key is hashable.
const _: fn() = || {
    fn is_keyed<S: KeyedStateStore<u64>>() {}
    is_keyed::<BoundedStore>();
};

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

/// One configured rate limit.
pub struct Limit {
    pub name: String,
    route: Option<String>,
    method: Option<Pattern>,
    mcp_name: Option<Pattern>,
    key: Vec<KeyPart>,
    dry_run: bool,
    limiter: RateLimiter<
        u64,
        BoundedStore,
        DefaultClock,
        NoOpMiddleware<<DefaultClock as Clock>::Instant>,
    >,
    clock: DefaultClock,
    started: Instant,
    /// Milliseconds since `started` of the last eviction pass.
    last_sweep_ms: AtomicU64,
}

impl Limit {
    pub fn new(cfg: &RateLimitConfig) -> Limit {
        let clock = DefaultClock::default();
        let quota: Quota = cfg.quota();
        Limit {
            name: cfg.name.clone(),
            route: cfg.matcher.route.clone(),
            method: cfg.matcher.method.clone(),
            mcp_name: cfg.matcher.name.clone(),
            key: cfg.key.clone(),
            dry_run: cfg.dry_run,
            limiter: RateLimiter::new(quota, BoundedStore::new(cfg.max_keys), clock.clone()),
            clock,
            started: Instant::now(),
            last_sweep_ms: AtomicU64::new(0),
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

    /// The 64-bit key of a request for this limit.
    pub fn key_of(&self, i: &LimitInput) -> u64 {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        for part in &self.key {
            match part {
                KeyPart::Route => i.route.hash(&mut h),
                KeyPart::Method => i.method.hash(&mut h),
                KeyPart::Name => i.name.hash(&mut h),
                KeyPart::Principal => match i.identity {
                    Some(id) => Some(id.subject.as_str()).hash(&mut h),
                    None => bearer_token(i.headers).hash(&mut h),
                },
                KeyPart::Claim(c) => i.identity.and_then(|id| id.claim_text(c)).hash(&mut h),
                KeyPart::ClientIp => i.client_ip.hash(&mut h),
                KeyPart::Header(n) => i.headers.get(n).map(|v| v.as_bytes()).hash(&mut h),
            }
            0xffu8.hash(&mut h); // separator
        }
        h.finish()
    }

    pub fn check(&self, i: &LimitInput) -> Verdict {
        if !self.applies(i) {
            return Verdict::NotApplicable;
        }
        self.sweep();
        match self.limiter.check_key(&self.key_of(i)) {
            Ok(()) => Verdict::Allowed,
            Err(_) if self.dry_run => Verdict::DryRunLimited,
            Err(not_until) => Verdict::Limited(not_until.wait_time_from(self.clock.now())),
        }
    }

    /// Evict idle keys about once a second (one caller does it; the others skip).
    fn sweep(&self) {
        let now = self.started.elapsed().as_millis() as u64;
        let last = self.last_sweep_ms.load(Ordering::Relaxed);
        if now.saturating_sub(last) >= 1000
            && self
                .last_sweep_ms
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            self.limiter.retain_recent();
        }
    }

    /// Live keys (for tests and metrics).
    pub fn live_keys(&self) -> usize {
        self.limiter.len()
    }
}

/// `Retry-After` in whole seconds (at least 1), rounded up.
pub fn retry_after_secs(wait: Duration) -> u64 {
    wait.as_nanos().div_ceil(1_000_000_000).max(1) as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    fn limit(yaml: &str) -> Limit {
        let cfg = Config::parse(
            &format!("pools:\n  d: {{instances: [127.0.0.1:1]}}\nrate_limits:\n{yaml}"),
            "t",
        )
        .unwrap();
        Limit::new(&cfg.rate_limits[0])
    }

    fn input<'a>(name: Option<&'a str>, h: &'a http::HeaderMap) -> LimitInput<'a> {
        LimitInput {
            route: "r",
            method: Some("tools/call"),
            name,
            headers: h,
            client_ip: None,
            identity: None,
        }
    }

    #[test]
    fn burst_then_limited_with_a_retry_after() {
        let l = limit("  - {name: l, key: [name], rate: 1/m, burst: 3}\n");
        let h = http::HeaderMap::new();
        for _ in 0..3 {
            assert_eq!(l.check(&input(Some("a"), &h)), Verdict::Allowed);
        }
        match l.check(&input(Some("a"), &h)) {
            Verdict::Limited(d) => assert!((19..=60).contains(&retry_after_secs(d)), "{d:?}"),
            v => panic!("{v:?}"),
        }
        // Another key is not limited.
        assert_eq!(l.check(&input(Some("b"), &h)), Verdict::Allowed);
    }

    #[test]
    fn dry_run_counts_but_never_limits() {
        let l = limit("  - {name: l, key: [name], rate: 1/h, burst: 1, dry_run: true}\n");
        let h = http::HeaderMap::new();
        assert_eq!(l.check(&input(Some("a"), &h)), Verdict::Allowed);
        assert_eq!(l.check(&input(Some("a"), &h)), Verdict::DryRunLimited);
    }

    #[test]
    fn matchers_select_requests() {
        let l = limit("  - {name: l, match: {name: deploy_*}, key: [name], rate: 1/h, burst: 1}\n");
        let h = http::HeaderMap::new();
        assert_eq!(l.check(&input(Some("lookup"), &h)), Verdict::NotApplicable);
        assert_eq!(l.check(&input(None, &h)), Verdict::NotApplicable);
        assert_eq!(l.check(&input(Some("deploy_x"), &h)), Verdict::Allowed);
    }

    #[test]
    fn principal_keys_separate_callers() {
        let l = limit("  - {name: l, key: [principal], rate: 1/h, burst: 1}\n");
        let mut a = http::HeaderMap::new();
        a.insert("authorization", "Bearer alice".parse().unwrap());
        let mut b = http::HeaderMap::new();
        b.insert("authorization", "Bearer bob".parse().unwrap());
        assert_eq!(l.check(&input(None, &a)), Verdict::Allowed);
        assert!(matches!(l.check(&input(None, &a)), Verdict::Limited(_)));
        assert_eq!(l.check(&input(None, &b)), Verdict::Allowed);
    }

    #[test]
    fn a_flood_of_keys_stays_within_the_cap_and_stays_limited() {
        let l = limit("  - {name: l, key: [name], rate: 1/h, burst: 1, max_keys: 1000}\n");
        let h = http::HeaderMap::new();
        let mut allowed = 0;
        for i in 0..100_000 {
            let n = format!("k{i}");
            if l.check(&input(Some(&n), &h)) == Verdict::Allowed {
                allowed += 1;
            }
        }
        assert!(l.live_keys() <= 1000 + SHARDS, "{} keys", l.live_keys());
        // Keys past the cap share overflow buckets: far fewer than 100k got through.
        assert!(allowed <= 1000 + 2 * SHARDS, "{allowed} allowed");
    }
}
