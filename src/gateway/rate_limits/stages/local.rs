//! The replica's own GCRA buckets: a keyed, bounded, least-recently-used state store for
//! governor, and the per-process random hash that places keys in it.
//!
//! Keys are 64-bit hashes under a hash key drawn at random when the process starts, so which
//! shard a caller lands in cannot be predicted (nor aimed at) from outside. Each shard holds at
//! most `max_keys / 16` buckets; a new key that arrives at a full shard evicts the shard's least
//! recently used bucket. A flood of fresh keys therefore only ever pushes out idle or rare
//! callers, and being pushed out forgets a bucket (it is full again on the next request), so a
//! steady caller is never limited *because of* other keys: it is limited only by its own rate.
//! Memory stays bounded by `max_keys` whatever the flood.

use governor::clock::{Clock, DefaultClock};
use governor::middleware::NoOpMiddleware;
use governor::nanos::Nanos;
use governor::state::keyed::{KeyedStateStore, ShrinkableKeyedStateStore};
use governor::state::StateStore;
use governor::{Quota, RateLimiter};
use lru::LruCache;
use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

pub(crate) const SHARDS: usize = 16;

thread_local! {
    /// Set while [`LocalLimiter::peek`] runs: the store computes governor's decision but keeps
    /// no change (no bucket spent, no key added), so `explain` can ask without a side effect.
    static PEEKING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// The hash key of this process: random, drawn once.
fn process_hash_key() -> &'static RandomState {
    static KEY: OnceLock<RandomState> = OnceLock::new();
    KEY.get_or_init(RandomState::new)
}

/// A hasher under this process's random key (SipHash-1-3).
pub(crate) fn keyed_hasher() -> impl Hasher {
    process_hash_key().build_hasher()
}

/// A keyed state store with a hard cap on the number of keys, evicting the least recently used.
pub(crate) struct BoundedStore {
    shards: Vec<Mutex<LruCache<u64, Nanos>>>,
    cap_per_shard: usize,
    evicted: AtomicU64,
}

impl BoundedStore {
    pub(crate) fn new(max_keys: usize) -> Self {
        BoundedStore {
            // Unbounded maps that we cap ourselves: `LruCache::new(cap)` would allocate the
            // whole capacity up front for every limit.
            shards: (0..SHARDS)
                .map(|_| Mutex::new(LruCache::unbounded()))
                .collect(),
            cap_per_shard: max_keys.div_ceil(SHARDS).max(1),
            evicted: AtomicU64::new(0),
        }
    }

    fn shard(&self, key: u64) -> MutexGuard<'_, LruCache<u64, Nanos>> {
        // A poisoned shard only means a panic elsewhere mid-update; the map is still usable.
        // The shard comes from the high bits: the low bits pick the hash map's own buckets.
        self.shards[(key >> 60) as usize % SHARDS]
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
        if PEEKING.with(|p| p.get()) {
            let current = shard.peek(key).copied();
            return f(current).map(|(out, _)| out);
        }
        if let Some(tat) = shard.get_mut(key) {
            let (out, new) = f(Some(*tat))?;
            *tat = new;
            return Ok(out);
        }
        let (out, new) = f(None)?;
        if shard.len() >= self.cap_per_shard {
            shard.pop_lru();
            self.evicted.fetch_add(1, Ordering::Relaxed);
        }
        shard.put(*key, new);
        Ok(out)
    }
}

impl ShrinkableKeyedStateStore<u64> for BoundedStore {
    fn retain_recent(&self, drop_below: Nanos) {
        for s in &self.shards {
            let mut s = s.lock().unwrap_or_else(|p| p.into_inner());
            s.retain(|_, tat| *tat >= drop_below);
        }
    }

    fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.lock().unwrap_or_else(|p| p.into_inner()).len())
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

/// A keyed GCRA limiter over a [`BoundedStore`], sweeping idle keys about once a second.
pub struct LocalLimiter {
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

impl LocalLimiter {
    pub fn new(quota: Quota, max_keys: usize) -> Self {
        let clock = DefaultClock::default();
        LocalLimiter {
            limiter: RateLimiter::new(quota, BoundedStore::new(max_keys), clock.clone()),
            clock,
            started: Instant::now(),
            last_sweep_ms: AtomicU64::new(0),
        }
    }

    /// Admit one request of `key`, or say how long to wait.
    pub fn check(&self, key: u64) -> Result<(), Duration> {
        self.sweep();
        self.limiter
            .check_key(&key)
            .map_err(|not_until| not_until.wait_time_from(self.clock.now()))
    }

    /// What [`LocalLimiter::check`] would answer for `key` now, spending nothing.
    pub(crate) fn peek(&self, key: u64) -> Result<(), Duration> {
        PEEKING.with(|p| p.set(true));
        let answer = self
            .limiter
            .check_key(&key)
            .map_err(|not_until| not_until.wait_time_from(self.clock.now()));
        PEEKING.with(|p| p.set(false));
        answer
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

    #[cfg(test)]
    pub(crate) fn live_keys(&self) -> usize {
        self.limiter.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::Hash;
    use std::num::NonZeroU32;

    #[test]
    fn the_hash_key_is_not_the_fixed_default() {
        let mut fixed = std::collections::hash_map::DefaultHasher::new();
        let mut ours = keyed_hasher();
        "alice".hash(&mut fixed);
        "alice".hash(&mut ours);
        assert_ne!(fixed.finish(), ours.finish());
        // ...and it is stable within the process.
        let mut again = keyed_hasher();
        "alice".hash(&mut again);
        let mut ours = keyed_hasher();
        "alice".hash(&mut ours);
        assert_eq!(ours.finish(), again.finish());
    }

    #[test]
    fn a_full_store_evicts_the_least_recently_used_key() {
        let quota = Quota::per_hour(NonZeroU32::new(1).unwrap());
        let l = LocalLimiter::new(quota, SHARDS); // one key per shard
                                                  // Two keys in the same shard (same high bits).
        let (a, b) = (1u64 << 60, (1u64 << 60) | 7);
        assert!(l.check(a).is_ok());
        assert!(l.check(a).is_err(), "a is limited while it is tracked");
        assert!(
            l.check(b).is_ok(),
            "a newcomer gets its own bucket, not a shared one"
        );
        assert_eq!(l.limiter.len(), 1);
        assert_eq!(l.limiter.len(), 1);
        assert!(l.check(a).is_ok(), "a was evicted: its bucket is forgotten");
    }
}
