//! The pieces of the history: the fixed-size [`Ring`], a [`Point`] (one interval) with its
//! [`Series`] (a pool or a tool) and [`Load`]s (an instance), their JSON, and the shared
//! [`Names`]. The caps that bound a point's size are here.

use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::Arc;

/// Per-second points kept: five minutes.
pub(crate) const SECONDS: usize = 300;
/// Per-minute points kept: an hour.
pub(crate) const MINUTES: usize = 60;
/// Pool series per point (the first pools by name past it are left out).
pub(crate) const MAX_POOLS: usize = 16;
/// Tool series per point: the busiest tools of that interval.
pub(crate) const MAX_TOOLS: usize = 8;
/// Instance loads per point.
pub(crate) const MAX_INSTANCES: usize = 32;
/// Names kept in the shared table before it is started afresh.
const MAX_NAMES: usize = 512;

/// A ring of at most `cap` values: pushing past it replaces the oldest.
#[derive(Debug)]
pub(crate) struct Ring<T> {
    buf: Vec<T>,
    cap: usize,
    next: usize,
}

impl<T> Ring<T> {
    pub(crate) fn new(cap: usize) -> Ring<T> {
        assert!(cap > 0, "a ring holds one value at least");
        Ring {
            buf: Vec::with_capacity(cap),
            cap,
            next: 0,
        }
    }

    pub(crate) fn push(&mut self, v: T) {
        if self.buf.len() < self.cap {
            self.buf.push(v);
        } else {
            self.buf[self.next] = v;
        }
        self.next = (self.next + 1) % self.cap;
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.buf.len()
    }

    #[cfg(test)]
    pub(crate) fn capacity(&self) -> usize {
        self.buf.capacity()
    }

    /// Oldest first.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &T> {
        let (newer, older) = if self.buf.len() < self.cap {
            (&self.buf[..], &self.buf[..0])
        } else {
            let (a, b) = self.buf.split_at(self.next);
            (a, b)
        };
        older.iter().chain(newer.iter())
    }
}

/// Requests, errors and latency of one pool or tool over an interval.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Series {
    pub name: Arc<str>,
    pub requests: u32,
    pub errors: u32,
    /// `NaN` when no request ended in the interval.
    pub p50_ms: f32,
    pub p99_ms: f32,
}

/// The balancer's view of one instance when a point was taken.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Load {
    pub pool: Arc<str>,
    pub name: Arc<str>,
    pub in_flight: u32,
    pub latency_ms: f32,
    pub up: bool,
}

/// What happened in one interval.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Point {
    /// The end of the interval (Unix ms).
    pub at_ms: u64,
    /// Its length in ms.
    pub span_ms: u32,
    pub requests: u32,
    /// client, upstream, gateway.
    pub errors: [u32; 3],
    /// completed, abandoned.
    pub flows: [u32; 2],
    /// hits, misses.
    pub cache: [u32; 2],
    /// Refused by a rate limit (not dry run) or shed by a concurrency limit.
    pub limited: u32,
    pub p50_ms: f32,
    pub p99_ms: f32,
    pub pools: Vec<Series>,
    pub tools: Vec<Series>,
    pub instances: Vec<Load>,
}

/// A number for JSON: `null` for `NaN`, never `-0`.
fn num(x: f32) -> Value {
    if x.is_nan() {
        Value::Null
    } else {
        json!(((x as f64) * 1000.0).round() / 1000.0 + 0.0)
    }
}

impl Series {
    fn json(&self) -> Value {
        json!({"name": &*self.name, "requests": self.requests, "errors": self.errors,
               "p50_ms": num(self.p50_ms), "p99_ms": num(self.p99_ms)})
    }
}

impl Point {
    pub(crate) fn json(&self) -> Value {
        let [hits, misses] = self.cache;
        let ratio = if hits + misses == 0 {
            f32::NAN
        } else {
            hits as f32 / (hits + misses) as f32
        };
        json!({
            "t": self.at_ms, "span_ms": self.span_ms, "requests": self.requests,
            "errors": {"client": self.errors[0], "upstream": self.errors[1], "gateway": self.errors[2]},
            "flows_completed": self.flows[0], "flows_abandoned": self.flows[1],
            "cache_hits": hits, "cache_misses": misses, "cache_hit_ratio": num(ratio),
            "limited": self.limited, "p50_ms": num(self.p50_ms), "p99_ms": num(self.p99_ms),
            "pools": self.pools.iter().map(Series::json).collect::<Vec<_>>(),
            "tools": self.tools.iter().map(Series::json).collect::<Vec<_>>(),
            "instances": self.instances.iter().map(|l| json!({"pool": &*l.pool, "name": &*l.name,
                "in_flight": l.in_flight, "latency_ms": num(l.latency_ms), "up": l.up})).collect::<Vec<_>>(),
        })
    }

    /// The bytes this point holds, its heap parts included (names are shared: counted once, in
    /// [`History::bytes`]).
    pub(crate) fn bytes(&self) -> usize {
        std::mem::size_of::<Point>()
            + (self.pools.capacity() + self.tools.capacity()) * std::mem::size_of::<Series>()
            + self.instances.capacity() * std::mem::size_of::<Load>()
    }
}

/// Names shared by every point, so a point stores a pointer, not a string.
#[derive(Debug, Default)]
pub(crate) struct Names(HashMap<Box<str>, Arc<str>>);

impl Names {
    pub(crate) fn get(&mut self, name: &str) -> Arc<str> {
        if let Some(a) = self.0.get(name) {
            return a.clone();
        }
        if self.0.len() >= MAX_NAMES {
            // Points keep their own Arcs; the table only stops sharing old names.
            self.0.clear();
        }
        let a: Arc<str> = Arc::from(name);
        self.0.insert(name.into(), a.clone());
        a
    }

    pub(crate) fn bytes(&self) -> usize {
        self.0.keys().map(|k| 2 * k.len() + 64).sum()
    }
}
