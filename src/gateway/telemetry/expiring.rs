//! A bounded map of digests that forgets in the order it learned: the shape of both per-replica
//! stores that follow something across requests (MRTR flows in [`crate::gateway::telemetry::flows`], tasks in
//! [`crate::gateway::telemetry::task_count`]).
//!
//! Every entry gets the same timeout, so entries expire in the order they were inserted and a
//! FIFO of `(digest, deadline, stamp)` finds the expired ones without a scan. An entry replaced
//! or removed leaves its old mark in the FIFO; the stamp tells a stale mark from the live one,
//! and the FIFO is compacted when stale marks outnumber the bound, so memory stays bounded by
//! `max` whatever the traffic. Past `max` entries the oldest is evicted to make room.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

/// Entries by digest, with a deadline each (see the module docs). Not synchronised: the stores
/// keep it under their own lock.
#[derive(Debug)]
pub(crate) struct Expiring<V> {
    map: HashMap<u64, (V, u64)>,
    order: VecDeque<(u64, Instant, u64)>,
    stamp: u64,
    timeout: Duration,
    max: usize,
}

impl<V> Expiring<V> {
    /// A map holding at most `max` entries (at least one), each for `timeout`.
    pub(crate) fn new(timeout: Duration, max: usize) -> Self {
        Expiring {
            map: HashMap::new(),
            order: VecDeque::new(),
            stamp: 0,
            timeout,
            max: max.max(1),
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }

    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    #[cfg(test)]
    /// Marks in the FIFO, stale ones included (bounded by about twice `max`).
    pub(crate) fn marks(&self) -> usize {
        self.order.len()
    }

    pub(crate) fn get(&self, digest: &u64) -> Option<&V> {
        self.map.get(digest).map(|(v, _)| v)
    }

    pub(crate) fn get_mut(&mut self, digest: &u64) -> Option<&mut V> {
        self.map.get_mut(digest).map(|(v, _)| v)
    }

    pub(crate) fn remove(&mut self, digest: &u64) -> Option<V> {
        self.map.remove(digest).map(|(v, _)| v)
    }

    /// Insert (or replace) with a fresh deadline; each entry evicted to make room goes to
    /// `evicted`.
    pub(crate) fn insert(
        &mut self,
        digest: u64,
        value: V,
        now: Instant,
        mut evicted: impl FnMut(V),
    ) {
        while self.map.len() >= self.max && !self.map.contains_key(&digest) {
            let Some((d, _, stamp)) = self.order.pop_front() else {
                break;
            };
            if let Some(v) = self.take_if_live(d, stamp) {
                evicted(v);
            }
        }
        self.stamp += 1;
        self.order
            .push_back((digest, now + self.timeout, self.stamp));
        self.map.insert(digest, (value, self.stamp));
        if self.order.len() > 2 * self.max + 64 {
            let map = &self.map;
            self.order
                .retain(|(d, _, stamp)| map.get(d).is_some_and(|(_, s)| s == stamp));
        }
    }

    /// Drop the entries whose deadline has passed, each to `expired`.
    pub(crate) fn expire(&mut self, now: Instant, mut expired: impl FnMut(V)) {
        while let Some(&(d, deadline, stamp)) = self.order.front() {
            if deadline > now {
                break;
            }
            self.order.pop_front();
            if let Some(v) = self.take_if_live(d, stamp) {
                expired(v);
            }
        }
    }

    fn take_if_live(&mut self, digest: u64, stamp: u64) -> Option<V> {
        if self.map.get(&digest).is_some_and(|(_, s)| *s == stamp) {
            self.remove(&digest)
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_expire_in_order_and_replacing_renews_the_deadline() {
        let t0 = Instant::now();
        let mut m = Expiring::new(Duration::from_secs(10), 10);
        m.insert(1, "a", t0, |_| panic!());
        m.insert(2, "b", t0 + Duration::from_secs(5), |_| panic!());
        m.insert(1, "a2", t0 + Duration::from_secs(6), |_| panic!());
        let mut gone = Vec::new();
        m.expire(t0 + Duration::from_secs(12), |v| gone.push(v));
        // 1's first mark is stale (replaced at 6 s, so due at 16 s); 2 is due at 15 s.
        assert!(gone.is_empty(), "{gone:?}");
        m.expire(t0 + Duration::from_secs(15), |v| gone.push(v));
        assert_eq!(gone, ["b"]);
        m.expire(t0 + Duration::from_secs(16), |v| gone.push(v));
        assert_eq!(gone, ["b", "a2"]);
        assert!(m.is_empty());
    }

    #[test]
    fn the_oldest_is_evicted_past_the_bound_and_marks_stay_bounded() {
        let t0 = Instant::now();
        let mut m = Expiring::new(Duration::from_secs(60), 3);
        let mut evicted = Vec::new();
        for d in 0..5u64 {
            m.insert(d, d, t0, |v| evicted.push(v));
        }
        assert_eq!(evicted, [0, 1]);
        assert_eq!(m.len(), 3);
        for _ in 0..1000 {
            m.insert(4, 4, t0, |_| panic!("replacing never evicts"));
        }
        assert!(m.marks() <= 2 * 3 + 64 + 1, "{}", m.marks());
        assert_eq!(m.remove(&4), Some(4));
        assert_eq!(m.get(&3), Some(&3));
    }
}
