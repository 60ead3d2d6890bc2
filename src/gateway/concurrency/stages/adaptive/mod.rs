//! The adaptive limit's arithmetic: a gradient on latency, fed one answered request at a time.
//! No clock and no I/O of its own (the caller passes `now`), so the unit tests feed samples.
//!
//! Every `window` (and at least [`MIN_SAMPLES`] answers), the median latency of the window is
//! compared with the lowest median seen (`min_rtt`):
//!
//! ```text
//! gradient = clamp(tolerance × min_rtt / median, 0.5, 2)
//! limit    = clamp(limit × gradient, min, max)        (only grown when the window was busy)
//! ```
//!
//! While the pool answers near its best, the gradient is `tolerance` (> 1) and the limit grows;
//! once requests queue in the pool, latency rises with in-flight and the limit settles where the
//! median is `tolerance` × the best: about `tolerance` × the pool's capacity. A window with
//! failures (5xx, the pool's own overload answer) cuts the limit to 90% whatever its latency.
//! A window where in-flight stayed below half the limit does not grow it (nothing measured
//! the limit's top).
//!
//! `min_rtt` must be measured again now and then (the pool may have become slower for good). A
//! quiet window (in-flight below half the limit) sees the pool's own latency: it keeps the best
//! current, and raises it when the median passed `tolerance` × the best. Under a steady
//! overload every answer has queued, so the lows it would see are not the pool's best. So,
//! after `min_rtt_window` without a quiet window or a new low, the limit **probes**: new calls get only `min` slots until
//! [`MIN_SAMPLES`] requests admitted with at most `min` in flight have answered; their median is
//! the new `min_rtt`, and the limit goes back to where it was. A probe that cannot get its
//! samples in 2 windows gives up and keeps the old `min_rtt`.

use std::time::{Duration, Instant};

/// Answers needed to close a window (or a probe).
pub(crate) const MIN_SAMPLES: usize = 8;
/// Most samples a window keeps (a busier window closes early).
const MAX_SAMPLES: usize = 256;
/// Answers slower than the best by more than this do not lower the limit below this share of
/// it in one window.
const FLOOR: f64 = 0.5;
/// Nor raise it by more than this.
const CEILING: f64 = 2.0;
/// A window with failures keeps this share of the limit.
const ON_FAILURE: f64 = 0.9;

/// The settings (from `pools.<name>.concurrency`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Settings {
    pub min: u32,
    pub max: u32,
    pub tolerance: f64,
    pub window: Duration,
    pub min_rtt_window: Duration,
}

/// One window's decision: the next limit from the last one and what the window measured.
/// `busy`: in-flight reached half the limit; `failed`: the window saw failures.
pub(crate) fn next_limit(
    limit: f64,
    s: &Settings,
    min_rtt: Duration,
    median: Duration,
    busy: bool,
    failed: bool,
) -> f64 {
    let next = if failed {
        limit * ON_FAILURE
    } else {
        let ratio = s.tolerance * min_rtt.as_secs_f64() / median.as_secs_f64().max(1e-9);
        let gradient = ratio.clamp(FLOOR, CEILING);
        if gradient > 1.0 && !busy {
            limit
        } else {
            limit * gradient
        }
    };
    next.clamp(f64::from(s.min), f64::from(s.max))
}

/// The limit of one pool and what it has measured.
#[derive(Debug)]
pub(crate) struct Gradient {
    s: Settings,
    limit: f64,
    /// The window being filled: its start, latencies, highest in-flight and failures.
    started: Option<Instant>,
    rtts: Vec<Duration>,
    peak: u32,
    failed: bool,
    /// The lowest window median, and when it was last measured afresh.
    min_rtt: Option<Duration>,
    measured: Option<Instant>,
    /// A probe in progress: since when, and its samples.
    probe: Option<(Instant, Vec<Duration>)>,
}

impl Gradient {
    pub(crate) fn new(s: Settings, initial: u32) -> Self {
        Gradient {
            limit: f64::from(initial.clamp(s.min, s.max)),
            s,
            started: None,
            rtts: Vec::with_capacity(MIN_SAMPLES),
            peak: 0,
            failed: false,
            min_rtt: None,
            measured: None,
            probe: None,
        }
    }

    /// The limit now.
    pub(crate) fn limit(&self) -> u32 {
        self.limit.round() as u32
    }

    /// The limit new calls get now: `min` while probing, else the limit (the pool's share of
    /// it is applied by `pool::PoolLimit`, which publishes the same).
    #[cfg(test)]
    pub(crate) fn first_leg_limit(&self) -> u32 {
        if self.probe.is_some() {
            self.s.min
        } else {
            self.limit()
        }
    }

    /// The best latency measured (the gradient's reference).
    pub(crate) fn min_rtt(&self) -> Option<Duration> {
        self.min_rtt
    }

    pub(crate) fn probing(&self) -> bool {
        self.probe.is_some()
    }

    /// One answered request: its latency, the in-flight count when it was admitted, and whether
    /// it failed. `true` when the limit (or the probe) changed.
    pub(crate) fn sample(
        &mut self,
        rtt: Duration,
        admitted_at: u32,
        failed: bool,
        now: Instant,
    ) -> bool {
        if let Some((since, got)) = &mut self.probe {
            if admitted_at <= self.s.min && !failed {
                got.push(rtt);
            }
            let (since, enough) = (*since, got.len() >= MIN_SAMPLES);
            if enough {
                let (_, mut got) = self.probe.take().expect("probing");
                self.min_rtt = Some(median(&mut got));
                self.measured = Some(now);
                self.restart(now);
                return true;
            }
            if now.duration_since(since) >= self.s.window * 2 {
                // No quiet answers to be had: keep the old best, try again a period later.
                self.probe = None;
                self.measured = Some(now);
                self.restart(now);
                return true;
            }
            return false;
        }
        let started = *self.started.get_or_insert(now);
        self.peak = self.peak.max(admitted_at);
        self.failed |= failed;
        if !failed {
            self.rtts.push(rtt);
        }
        let full = self.rtts.len() >= MAX_SAMPLES;
        let due = now.duration_since(started) >= self.s.window && self.rtts.len() >= MIN_SAMPLES;
        if !(full || due || (self.failed && now.duration_since(started) >= self.s.window)) {
            return false;
        }
        self.close(now);
        true
    }

    /// Close the window: the next limit, and a probe when the best is old.
    fn close(&mut self, now: Instant) {
        let busy = f64::from(self.peak) * 2.0 >= self.limit;
        if self.rtts.is_empty() {
            self.limit = next_limit(
                self.limit,
                &self.s,
                Duration::ZERO,
                Duration::ZERO,
                busy,
                true,
            );
            self.restart(now);
            return;
        }
        let med = median(&mut self.rtts);
        let best = match self.min_rtt {
            // A quiet window saw the pool's own latency, not a queue: the best stands measured,
            // and follows the pool up when the pool itself got slower.
            Some(b) if b <= med && !busy => {
                self.measured = Some(now);
                if med.as_secs_f64() > b.as_secs_f64() * self.s.tolerance {
                    med
                } else {
                    b
                }
            }
            Some(b) if b <= med => b,
            _ => {
                self.measured = Some(now);
                med
            }
        };
        self.min_rtt = Some(best);
        self.limit = next_limit(self.limit, &self.s, best, med, busy, self.failed);
        self.restart(now);
        let stale = self
            .measured
            .is_some_and(|m| now.duration_since(m) >= self.s.min_rtt_window);
        if stale {
            self.probe = Some((now, Vec::with_capacity(MIN_SAMPLES)));
        }
    }

    fn restart(&mut self, now: Instant) {
        self.started = Some(now);
        self.rtts.clear();
        self.peak = 0;
        self.failed = false;
    }
}

fn median(v: &mut [Duration]) -> Duration {
    let mid = v.len() / 2;
    *v.select_nth_unstable(mid).1
}

#[cfg(test)]
mod tests;
