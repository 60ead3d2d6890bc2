//! What each federated pool serves, as the gateway last learned it: its `server/discover`
//! result and every page of its four lists, each with the freshness and scope the server gave.
//!
//! The store outlives a config (it is carried over on reload, by pool name) so that a reload
//! never forgets what the fleet serves; the refresh loop ([`crate::gateway::federation::journey::refresh`]) keeps it current.

use serde_json::{Map, Value};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub(crate) use crate::mcp::lists::Kind;

/// One list (every page, in order) or a `server/discover` result, as received.
#[derive(Debug, Clone)]
pub(crate) struct List {
    /// Shared: an answer served from the catalog takes it without copying.
    pub items: Arc<Vec<Value>>,
    /// The smallest `ttlMs` of its pages (missing or negative: 0).
    pub ttl: Duration,
    /// Some page said `cacheScope: private`.
    pub private: bool,
    pub at: Instant,
}

impl List {
    /// How much longer the list is fresh for anyone (`None`: private, or stale).
    pub(crate) fn fresh_for(&self, now: Instant) -> Option<Duration> {
        if self.private {
            return None;
        }
        let end = self.at + self.ttl;
        (now < end).then(|| end - now)
    }
}

/// A pool's `server/discover` result, as the merged one needs it (`freshness.items` holds the
/// result's versions, capabilities and instructions as one JSON object).
#[derive(Debug, Clone)]
pub(crate) struct Discover {
    pub capabilities: Map<String, Value>,
    pub freshness: List,
}

/// What one pool serves.
#[derive(Debug, Clone, Default)]
pub(crate) struct PoolCatalog {
    pub discover: Option<Discover>,
    lists: [Option<List>; 4],
    /// The last refresh that succeeded.
    pub loaded: Option<Instant>,
    /// Why the last refresh failed, and since when refreshes fail.
    pub failing: Option<(String, Instant)>,
}

/// How a catalog stands, as metrics and the admin endpoint show it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum State {
    /// Never loaded: its names are unknown.
    Unknown,
    /// The last refresh succeeded.
    Fresh,
    /// The last refresh failed; the previous catalog still routes (within `keep_stale`).
    Stale,
    /// Refreshes have failed for longer than `keep_stale`: it routes nothing.
    Expired,
}

impl State {
    pub(crate) const ALL: [State; 4] = [State::Unknown, State::Fresh, State::Stale, State::Expired];
    pub(crate) fn label(self) -> &'static str {
        match self {
            State::Unknown => "unknown",
            State::Fresh => "fresh",
            State::Stale => "stale",
            State::Expired => "expired",
        }
    }
}

impl PoolCatalog {
    pub(crate) fn list(&self, kind: Kind) -> Option<&List> {
        self.lists[kind as usize].as_ref()
    }

    pub(crate) fn set_list(&mut self, kind: Kind, list: Option<List>) {
        self.lists[kind as usize] = list;
    }

    pub(crate) fn state(&self, now: Instant, keep_stale: Duration) -> State {
        match (self.loaded, &self.failing) {
            (None, _) => State::Unknown,
            (Some(_), None) => State::Fresh,
            (Some(at), Some(_)) if now.saturating_duration_since(at) <= keep_stale => State::Stale,
            (Some(_), Some(_)) => State::Expired,
        }
    }

    /// Whether its names route (fresh or stale, not expired or unknown).
    pub(crate) fn routes(&self, now: Instant, keep_stale: Duration) -> bool {
        matches!(self.state(now, keep_stale), State::Fresh | State::Stale)
    }

    /// When the routing catalog should be fetched again: when its shortest list runs out,
    /// within `floor` and `ceiling`.
    pub(crate) fn next_refresh(&self, floor: Duration, ceiling: Duration) -> Duration {
        let ttls = self.lists.iter().flatten().map(|l| l.ttl);
        let ttls = ttls.chain(self.discover.iter().map(|d| d.freshness.ttl));
        ttls.min().unwrap_or(ceiling).clamp(floor, ceiling)
    }
}

/// Every pool's catalog, by pool name, and when each is due for a refresh. Carried over reloads.
#[derive(Default)]
pub struct Store {
    catalogs: Mutex<HashMap<String, Arc<PoolCatalog>>>,
    due: Mutex<HashMap<String, Instant>>,
    /// Bumped on every change, so views know when to rebuild.
    pub version: std::sync::atomic::AtomicU64,
}

impl Store {
    pub(crate) fn get(&self, pool: &str) -> Arc<PoolCatalog> {
        let map = self.catalogs.lock().expect("catalog lock");
        map.get(pool).cloned().unwrap_or_default()
    }

    pub(crate) fn put(&self, pool: &str, cat: PoolCatalog) {
        let mut map = self.catalogs.lock().expect("catalog lock");
        map.insert(pool.to_string(), Arc::new(cat));
        self.version
            .fetch_add(1, std::sync::atomic::Ordering::Release);
    }

    /// Ask for a refresh of `pool` at `at` (sooner requests win).
    pub fn due_at(&self, pool: &str, at: Instant) {
        let mut due = self.due.lock().expect("catalog lock");
        let slot = due.entry(pool.to_string()).or_insert(at);
        if at < *slot {
            *slot = at;
        }
    }

    /// Ask for a refresh of `pool` at `at`, replacing the previous time.
    pub(crate) fn schedule(&self, pool: &str, at: Instant) {
        let mut due = self.due.lock().expect("catalog lock");
        due.insert(pool.to_string(), at);
    }

    /// Whether `pool` is due now (a pool never scheduled is due).
    pub(crate) fn is_due(&self, pool: &str, now: Instant) -> bool {
        let due = self.due.lock().expect("catalog lock");
        due.get(pool).is_none_or(|at| *at <= now)
    }
}
