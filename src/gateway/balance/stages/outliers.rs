//! Outliers: ejection of instances much slower than the rest of their pool
//! (`pools.<name>.outliers`, [`crate::config::balance`]), as Envoy's outlier detection ejects
//! on errors (which `health` already does: `ejection.consecutive_failures`).
//!
//! The pool is judged once per window (`interval`), by the request whose answer closes it (no
//! timer: a pool without traffic has nothing to judge). The latency of an instance is the
//! balancer's own estimate ([`super::load`]), which a lone slow answer does not move; an instance
//! is judged only if it answered at least `min_samples` times in the window (the count is kept
//! here), so an instance the balancer avoids, or just back from an ejection, is not judged on
//! stale numbers. [`judge`] is plain arithmetic over what was seen; the ejection itself is kept
//! by [`crate::gateway::stages::health::PoolHealth::eject_outlier`], so every balancing mode
//! skips an ejected instance as it skips an unhealthy one (a hash key moves to the next
//! instance on the ring and comes back when the ejection ends), and panic mode applies.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use crate::config::balance::OutlierConfig;

use super::Pool;

/// The detector's state of one pool: the current window.
#[derive(Debug)]
pub(crate) struct Outliers {
    pub(crate) cfg: OutlierConfig,
    /// [`super::load::now_ns`] at the start of the current window.
    window_from: AtomicU64,
    /// Answers of each instance in the current window.
    samples: Vec<AtomicU32>,
}

impl Outliers {
    pub(crate) fn new(cfg: OutlierConfig, n: usize, now: u64) -> Self {
        Outliers {
            cfg,
            window_from: AtomicU64::new(now),
            samples: (0..n).map(|_| AtomicU32::new(0)).collect(),
        }
    }
}

/// What the detector knows of one instance at the end of a window.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Seen {
    /// The balancer's latency estimate, in nanoseconds.
    pub latency_ns: f64,
    /// Answers in the window.
    pub samples: u32,
    /// Whether the instance gets new requests (not down, not ejected for any reason).
    pub usable: bool,
}

/// The verdict on one window.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Judged {
    /// The latency the instances were compared with (`None`: fewer than two were judged).
    pub baseline_ns: Option<f64>,
    /// The instances to eject, slowest first.
    pub eject: Vec<usize>,
    /// The instances judged and found no outlier.
    pub clear: Vec<usize>,
}

/// The pool's verdict: the usable instances with at least `min_samples` answers are judged; the
/// baseline is the `baseline` quantile of their latencies (nearest rank, rounding down: the
/// lower median of an even count); an instance more than `latency_ratio` times the baseline and
/// `min_gap` above it is an outlier. The slowest outliers are ejected while the instances out
/// of the pool (for any reason, these included) stay within `max_ejected_percent` of it (at
/// least one may always be ejected) and one usable instance remains.
pub(crate) fn judge(seen: &[Seen], cfg: &OutlierConfig) -> Judged {
    let judged: Vec<usize> = (0..seen.len())
        .filter(|&i| seen[i].usable && seen[i].samples >= cfg.min_samples)
        .collect();
    if judged.len() < 2 {
        return Judged::default();
    }
    let mut lat: Vec<f64> = judged.iter().map(|&i| seen[i].latency_ns).collect();
    lat.sort_by(f64::total_cmp);
    let rank = ((lat.len() - 1) as f64 * cfg.baseline.clamp(0.0, 1.0)).floor() as usize;
    let base = lat[rank];
    let gap = cfg.min_gap.as_nanos() as f64;
    let slow = |i: &usize| {
        let l = seen[*i].latency_ns;
        l > base * cfg.latency_ratio && l - base >= gap
    };
    let (mut eject, clear): (Vec<usize>, Vec<usize>) = judged.into_iter().partition(slow);
    eject.sort_by(|&a, &b| seen[b].latency_ns.total_cmp(&seen[a].latency_ns));
    let n = seen.len();
    let out = seen.iter().filter(|s| !s.usable).count();
    let allowed = (n * cfg.max_ejected_percent as usize / 100).max(1);
    let budget = allowed.saturating_sub(out).min(n.saturating_sub(out + 1));
    eject.truncate(budget);
    Judged {
        baseline_ns: Some(base),
        eject,
        clear,
    }
}

/// One ejection, for the metrics and the log.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Ejection {
    pub index: usize,
    pub time: Duration,
    pub latency_ns: f64,
    pub baseline_ns: f64,
}

impl Pool {
    /// An answer of instance `i` was observed at `now` (its latency is already in
    /// `loads[i]`): count it, and when it closes the window, judge the pool. The ejections made
    /// (none, without `outliers`, or before the window's end).
    pub(crate) fn outlier_sample(&self, i: usize, now: u64) -> Vec<Ejection> {
        let Some(o) = &self.outliers else {
            return Vec::new();
        };
        o.samples[i].fetch_add(1, Ordering::Relaxed);
        let from = o.window_from.load(Ordering::Relaxed);
        if now.saturating_sub(from) < o.cfg.interval.as_nanos() as u64
            || (o.window_from)
                .compare_exchange(from, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_err()
        {
            return Vec::new();
        }
        let seen: Vec<Seen> = (0..self.instances.len())
            .map(|k| Seen {
                latency_ns: self.loads[k].latency_ns(),
                samples: o.samples[k].swap(0, Ordering::Relaxed),
                usable: self.health.usable(k),
            })
            .collect();
        let judged = judge(&seen, &o.cfg);
        for &k in &judged.clear {
            self.health.outlier_cleared(k);
        }
        let baseline_ns = judged.baseline_ns.unwrap_or_default();
        (judged.eject.iter())
            .map(|&k| Ejection {
                index: k,
                time: (self.health).eject_outlier(k, o.cfg.base_ejection, o.cfg.max_ejection),
                latency_ns: seen[k].latency_ns,
                baseline_ns,
            })
            .collect()
    }
}

#[cfg(test)]
#[path = "outlier_tests.rs"]
mod tests;
