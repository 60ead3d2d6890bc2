//! One reading of the gateway's metrics for the history ([`super`]): cumulative counts
//! (requests and errors by side, per pool and per tool, MRTR flows, cache, limits) and the
//! request-duration histogram's buckets, overall, per pool and per tool. Two readings make a
//! point ([`Cumulative::delta`]); a counter that went back (a reload that rebuilt it) counts 0.

use prometheus::proto::{Metric, MetricFamily};
use std::collections::BTreeMap;

use super::point::{Load, Names, Point, Series, MAX_INSTANCES, MAX_POOLS, MAX_TOOLS};
use crate::gateway::telemetry::recent;

/// Counts and latency buckets of one pool, one tool, or everything.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Hist {
    pub requests: u64,
    pub errors: u64,
    /// Cumulative count per bucket bound (the histogram's own cumulative counts).
    pub buckets: Vec<u64>,
    /// Observations (the `+Inf` bucket).
    pub count: u64,
}

impl Hist {
    fn add_buckets(&mut self, m: &Metric) {
        let h = m.get_histogram();
        let b = h.get_bucket();
        if self.buckets.len() < b.len() {
            self.buckets.resize(b.len(), 0);
        }
        for (i, x) in b.iter().enumerate() {
            self.buckets[i] += x.cumulative_count();
        }
        self.count += h.get_sample_count();
    }
}

/// A reading.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Cumulative {
    pub all: Hist,
    /// client, upstream, gateway.
    pub errors: [u64; 3],
    /// completed, abandoned.
    pub flows: [u64; 2],
    /// hits, misses.
    pub cache: [u64; 2],
    pub limited: u64,
    /// The duration histogram's bucket bounds (seconds).
    pub bounds: Vec<f64>,
    pub pools: BTreeMap<String, Hist>,
    pub tools: BTreeMap<String, Hist>,
}

fn label<'a>(m: &'a Metric, name: &str) -> &'a str {
    m.get_label()
        .iter()
        .find(|l| l.name() == name)
        .map_or("", |l| l.value())
}

/// Whose fault a `requests_total` sample is: `None` when neither's (by [`recent::side`] on its
/// status class and code labels). Index into [`Cumulative::errors`].
pub(crate) fn side_of_sample(status: &str, code: &str) -> Option<recent::Side> {
    let status = match status {
        "5xx" => 500,
        "4xx" => 400,
        _ => 200,
    };
    // A code label is the code, or `_other` for one outside the known list: still the gateway's.
    let code = (!code.is_empty()).then(|| code.parse().unwrap_or(i32::MIN));
    recent::side(status, code)
}

fn side_index(s: recent::Side) -> usize {
    match s {
        recent::Side::Client => 0,
        recent::Side::Upstream => 1,
        recent::Side::Gateway => 2,
    }
}

impl Cumulative {
    /// Read the families of one `gather()`.
    pub(crate) fn read(all: &[MetricFamily]) -> Cumulative {
        let mut c = Cumulative::default();
        for f in all {
            let metrics = f.get_metric();
            let counter = |m: &Metric| m.get_counter().get_value() as u64;
            match f.name() {
                "mcp_edge_requests_total" => {
                    metrics.iter().for_each(|m| c.add_request(m, counter(m)))
                }
                "mcp_edge_request_duration_seconds" => {
                    metrics.iter().for_each(|m| c.add_duration(m))
                }
                "mcp_edge_mrtr_flows_total" => {
                    for m in metrics {
                        match label(m, "outcome") {
                            "completed" => c.flows[0] += counter(m),
                            "abandoned" => c.flows[1] += counter(m),
                            _ => {}
                        }
                    }
                }
                "mcp_edge_cache_hits_total" => {
                    c.cache[0] += metrics.iter().map(counter).sum::<u64>()
                }
                "mcp_edge_cache_misses_total" => {
                    c.cache[1] += metrics.iter().map(counter).sum::<u64>()
                }
                "mcp_edge_rate_limit_decisions_total" | "mcp_edge_concurrency_decisions_total" => {
                    let refused = |m: &&Metric| matches!(label(m, "decision"), "limited" | "shed");
                    c.limited += metrics.iter().filter(refused).map(counter).sum::<u64>();
                }
                _ => {}
            }
        }
        c
    }

    fn add_request(&mut self, m: &Metric, n: u64) {
        let side = side_of_sample(label(m, "status"), label(m, "code"));
        let bad = u64::from(side.is_some()) * n;
        self.all.requests += n;
        if let Some(s) = side {
            self.errors[side_index(s)] += n;
        }
        let pool = self.pools.entry(label(m, "pool").to_string()).or_default();
        pool.requests += n;
        pool.errors += bad;
        if label(m, "method") == "tools/call" {
            let tool = self.tools.entry(label(m, "name").to_string()).or_default();
            tool.requests += n;
            tool.errors += bad;
        }
    }

    fn add_duration(&mut self, m: &Metric) {
        if self.bounds.is_empty() {
            self.bounds = m
                .get_histogram()
                .get_bucket()
                .iter()
                .map(|b| b.upper_bound())
                .collect();
        }
        self.all.add_buckets(m);
        self.pools
            .entry(label(m, "pool").to_string())
            .or_default()
            .add_buckets(m);
        if label(m, "method") == "tools/call" {
            self.tools
                .entry(label(m, "name").to_string())
                .or_default()
                .add_buckets(m);
        }
    }

    /// Roughly the bytes of this reading.
    pub(crate) fn bytes(&self) -> usize {
        let hist = |h: &Hist| std::mem::size_of::<Hist>() + h.buckets.len() * 8;
        let map = |m: &BTreeMap<String, Hist>| {
            m.iter().map(|(k, h)| k.len() + 48 + hist(h)).sum::<usize>()
        };
        std::mem::size_of::<Cumulative>()
            + self.bounds.len() * 8
            + map(&self.pools)
            + map(&self.tools)
    }

    /// The point from this reading (taken at `t0`) to `now` (taken at `t1`).
    pub(crate) fn delta(
        &self,
        now: &Cumulative,
        t0: u64,
        t1: u64,
        names: &mut Names,
        mut instances: Vec<Load>,
    ) -> Point {
        let d = |a: u64, b: u64| u32::try_from(b.saturating_sub(a)).unwrap_or(u32::MAX);
        let bounds = &now.bounds;
        let series = |name: &str, prev: Option<&Hist>, cur: &Hist, names: &mut Names| {
            let empty = Hist::default();
            let prev = prev.unwrap_or(&empty);
            let (p50, p99) = quantiles(bounds, prev, cur);
            Series {
                name: names.get(name),
                requests: d(prev.requests, cur.requests),
                errors: d(prev.errors, cur.errors),
                p50_ms: p50,
                p99_ms: p99,
            }
        };
        let pools: Vec<Series> = now
            .pools
            .iter()
            .filter(|(n, _)| !n.is_empty())
            .take(MAX_POOLS)
            .map(|(n, h)| series(n, self.pools.get(n), h, names))
            .collect();
        let mut busy: Vec<(&String, u64)> = now
            .tools
            .iter()
            .map(|(n, h)| {
                (
                    n,
                    h.requests
                        .saturating_sub(self.tools.get(n).map_or(0, |p| p.requests)),
                )
            })
            .filter(|(n, r)| *r > 0 && !n.is_empty())
            .collect();
        busy.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        let tools = busy
            .into_iter()
            .take(MAX_TOOLS)
            .map(|(n, _)| series(n, self.tools.get(n), &now.tools[n], names))
            .collect();
        let (p50, p99) = quantiles(bounds, &self.all, &now.all);
        instances.truncate(MAX_INSTANCES);
        instances.shrink_to_fit();
        let pair = |a: [u64; 2], b: [u64; 2]| [d(a[0], b[0]), d(a[1], b[1])];
        Point {
            at_ms: t1,
            span_ms: u32::try_from(t1.saturating_sub(t0)).unwrap_or(u32::MAX),
            requests: d(self.all.requests, now.all.requests),
            errors: [0, 1, 2].map(|i| d(self.errors[i], now.errors[i])),
            flows: pair(self.flows, now.flows),
            cache: pair(self.cache, now.cache),
            limited: d(self.limited, now.limited),
            p50_ms: p50,
            p99_ms: p99,
            pools,
            tools,
            instances,
        }
    }
}

/// p50 and p99 (ms) of the observations between two readings of one histogram, interpolated
/// inside the bucket that holds each rank; `NaN` when none; the largest bound when the rank is
/// in the `+Inf` bucket.
pub(crate) fn quantiles(bounds: &[f64], prev: &Hist, cur: &Hist) -> (f32, f32) {
    let total = cur.count.saturating_sub(prev.count);
    if total == 0 || bounds.is_empty() {
        return (f32::NAN, f32::NAN);
    }
    let at = |i: usize| {
        cur.buckets
            .get(i)
            .copied()
            .unwrap_or(0)
            .saturating_sub(prev.buckets.get(i).copied().unwrap_or(0))
    };
    let q = |q: f64| -> f32 {
        let rank = q * total as f64;
        let mut below = 0u64;
        for (i, upper) in bounds.iter().enumerate() {
            let cum = at(i);
            if cum as f64 >= rank && cum > below {
                let lower = if i == 0 { 0.0 } else { bounds[i - 1] };
                let frac = (rank - below as f64) / (cum - below) as f64;
                return ((lower + (upper - lower) * frac.clamp(0.0, 1.0)) * 1000.0) as f32;
            }
            below = below.max(cum);
        }
        (bounds[bounds.len() - 1] * 1000.0) as f32
    };
    (q(0.5), q(0.99))
}
