//! Load: what the balancer knows about the work each instance is doing.
//!
//! Per instance, three numbers, updated lock-light from the request path:
//! - **in flight**: requests sent and not finished. What counts is what costs the instance: a
//!   `subscriptions/listen` stream holds a connection for minutes while the instance idles, so
//!   it stops counting once its response head arrives ([`crate::mcp::methods::holds_open`]). A
//!   task's background work is invisible here (its `tools/call` answers at once with the task,
//!   and each `tasks/get` is a short request of its own).
//! - **a peak-sensitive EWMA of latency** (Finagle's and linkerd's "peak EWMA"): a sample
//!   above the estimate replaces it at once; one below pulls it down with a weight that grows
//!   with the time since the last sample (the pool's `latency_decay`, [`crate::config::pools::LATENCY_DECAY`] by default). The estimate also decays
//!   toward zero while no sample comes, so an instance that was slow and got no traffic since is
//!   tried again after a while instead of being shunned forever. An instance without samples
//!   starts at [`PRIOR`]. The sample is the time to the response head: a JSON answer's head
//!   comes when the work is done; a stream's head comes early and its length is the client's.
//! - **a ramp** for slow start: the instant from which an instance (new on reload, back from
//!   down, or at the end of an ejection) grows from [`RAMP_FLOOR`] to its full share.
//!
//! The state of an instance is an `Arc`, carried over a reload for instances that stay (same
//! name, same address): requests of the old generation release what they took from the same
//! counters the new one reads.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// The latency an instance without samples is assumed to have.
pub(crate) const PRIOR: Duration = Duration::from_millis(10);
/// The share a slow-starting instance takes at the start of its ramp.
pub(crate) const RAMP_FLOOR: f64 = 0.1;
/// `ramp_from` of an instance that is not ramping.
const NOT_RAMPING: u64 = 0;

/// Nanoseconds since the process's balancing epoch (shared by every generation of config, so
/// state carried over a reload keeps its meaning).
pub fn now_ns() -> u64 {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    // +1: 0 is reserved for "not ramping".
    EPOCH.get_or_init(Instant::now).elapsed().as_nanos() as u64 + 1
}

/// The load of one instance.
#[derive(Debug)]
pub struct InstanceLoad {
    in_flight: AtomicU32,
    ewma: Mutex<Ewma>,
    /// [`now_ns`] from which the instance ramps up ([`NOT_RAMPING`]: full share).
    ramp_from: AtomicU64,
}

#[derive(Debug, Clone, Copy)]
struct Ewma {
    /// Nanoseconds; `None` until the first sample.
    estimate: Option<f64>,
    /// [`now_ns`] of the last update.
    at: u64,
}

impl Default for InstanceLoad {
    fn default() -> Self {
        InstanceLoad {
            in_flight: AtomicU32::new(0),
            ewma: Mutex::new(Ewma {
                estimate: None,
                at: now_ns(),
            }),
            ramp_from: AtomicU64::new(NOT_RAMPING),
        }
    }
}

/// `exp(-elapsed / decay)`: the weight the old estimate keeps after `elapsed` nanoseconds.
fn keep(elapsed: u64, decay: Duration) -> f64 {
    (-(elapsed as f64) / decay.as_nanos().max(1) as f64).exp()
}

impl InstanceLoad {
    /// A request was sent to the instance.
    pub fn begin(&self) {
        self.in_flight.fetch_add(1, Ordering::Relaxed);
    }

    /// A request [`InstanceLoad::begin`] counted no longer costs the instance.
    pub fn end(&self) {
        // Saturating: never wraps even if a release were doubled.
        let _ = self
            .in_flight
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
    }

    pub(crate) fn in_flight(&self) -> u32 {
        self.in_flight.load(Ordering::Relaxed)
    }

    /// One latency sample (time to the response head), at `now` ([`now_ns`]), for an average
    /// with time constant `decay`.
    pub fn observe(&self, sample: Duration, now: u64, decay: Duration) {
        let rtt = sample.as_nanos() as f64;
        let mut e = self.ewma.lock().unwrap_or_else(|p| p.into_inner());
        e.estimate = Some(match e.estimate {
            Some(old) if rtt <= old => {
                let w = keep(now.saturating_sub(e.at), decay);
                old * w + rtt * (1.0 - w)
            }
            // A peak replaces the estimate at once (and the first sample sets it).
            _ => rtt,
        });
        e.at = e.at.max(now);
    }

    /// The latency estimate at `now`, in nanoseconds: the EWMA decayed by the time since its
    /// last sample, or [`PRIOR`] before any sample.
    pub(crate) fn latency_ns(&self, now: u64, decay: Duration) -> f64 {
        let e = *self.ewma.lock().unwrap_or_else(|p| p.into_inner());
        match e.estimate {
            Some(v) => v * keep(now.saturating_sub(e.at), decay),
            None => PRIOR.as_nanos() as f64,
        }
    }

    /// Start a ramp at `from` ([`now_ns`], possibly in the future: the end of an ejection).
    pub fn ramp_from(&self, from: u64) {
        self.ramp_from.store(from.max(1), Ordering::Relaxed);
    }

    /// The share of its weight the instance takes at `now` over a `window`: from
    /// [`RAMP_FLOOR`] to 1, linearly; 1 when not ramping or without slow start.
    pub(crate) fn ramp(&self, now: u64, window: Duration) -> f64 {
        let from = self.ramp_from.load(Ordering::Relaxed);
        if from == NOT_RAMPING || window.is_zero() {
            return 1.0;
        }
        let done = now.saturating_sub(from) as f64 / window.as_nanos() as f64;
        if done >= 1.0 && now > from {
            // Finished: later reads skip the arithmetic.
            let _ = self.ramp_from.compare_exchange(
                from,
                NOT_RAMPING,
                Ordering::Relaxed,
                Ordering::Relaxed,
            );
            return 1.0;
        }
        RAMP_FLOOR + (1.0 - RAMP_FLOOR) * done.clamp(0.0, 1.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::pools::LATENCY_DECAY;

    const MS: u64 = 1_000_000;

    #[test]
    fn a_peak_replaces_the_estimate_and_lower_samples_pull_it_down_with_time() {
        let l = InstanceLoad::default();
        let t0 = now_ns();
        assert_eq!(l.latency_ns(t0, LATENCY_DECAY), PRIOR.as_nanos() as f64);
        l.observe(Duration::from_millis(5), t0, LATENCY_DECAY);
        assert!((l.latency_ns(t0, LATENCY_DECAY) - 5.0 * MS as f64).abs() < 1.0);
        l.observe(Duration::from_millis(50), t0 + MS, LATENCY_DECAY);
        assert!((l.latency_ns(t0 + MS, LATENCY_DECAY) - 50.0 * MS as f64).abs() < 1.0);
        // A fast sample right after barely moves it; one after a long pause moves it far.
        l.observe(Duration::from_millis(5), t0 + 2 * MS, LATENCY_DECAY);
        assert!(l.latency_ns(t0 + 2 * MS, LATENCY_DECAY) > 49.0 * MS as f64);
        let later = t0 + 2 * MS + 30_000 * MS;
        l.observe(Duration::from_millis(5), later, LATENCY_DECAY);
        let v = l.latency_ns(later, LATENCY_DECAY);
        assert!(v > 5.0 * MS as f64 && v < 8.0 * MS as f64, "{v}");
    }

    #[test]
    fn an_idle_estimate_decays_toward_zero() {
        let l = InstanceLoad::default();
        let t0 = now_ns();
        l.observe(Duration::from_millis(100), t0, LATENCY_DECAY);
        let after = l.latency_ns(t0 + LATENCY_DECAY.as_nanos() as u64, LATENCY_DECAY);
        assert!((after / (100.0 * MS as f64) - (-1f64).exp()).abs() < 1e-6);
    }

    #[test]
    fn in_flight_never_wraps() {
        let l = InstanceLoad::default();
        l.begin();
        l.end();
        l.end();
        assert_eq!(l.in_flight(), 0);
    }

    #[test]
    fn a_ramp_grows_linearly_from_the_floor_and_ends() {
        let l = InstanceLoad::default();
        let w = Duration::from_secs(10);
        assert_eq!(l.ramp(now_ns(), w), 1.0);
        let t0 = now_ns() + 1000 * MS;
        l.ramp_from(t0);
        // Before the ramp starts (an ejection still running): the floor.
        assert_eq!(l.ramp(t0 - MS, w), RAMP_FLOOR);
        let half = l.ramp(t0 + 5000 * MS, w);
        assert!((half - (RAMP_FLOOR + 0.45)).abs() < 1e-9, "{half}");
        assert_eq!(l.ramp(t0 + 10_001 * MS, w), 1.0);
        assert_eq!(l.ramp(t0, w), 1.0, "a finished ramp stays finished");
        assert_eq!(l.ramp(t0, Duration::ZERO), 1.0);
    }
}
