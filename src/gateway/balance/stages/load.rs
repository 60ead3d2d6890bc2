//! Load: what the balancer knows about the work each instance is doing.
//!
//! Per instance, three numbers, updated lock-light from the request path:
//! - **in flight**: requests sent and not finished. What counts is what costs the instance: a
//!   `subscriptions/listen` stream holds a connection for minutes while the instance idles, so
//!   it stops counting once its response head arrives ([`crate::mcp::methods::holds_open`]). A
//!   task's background work is invisible here (its `tools/call` answers at once with the task,
//!   and each `tasks/get` is a short request of its own).
//! - **a latency estimate that moves on runs of samples, not on one** ([`Ewma::update`]):
//!   [`RAISE_RUN`] samples in a row well above the estimate (more than [`MARGIN`] times it)
//!   raise it at once to the lowest of them (a slow spell shows on the third request);
//!   [`LOWER_RUN`] in a row well below lower it at once to the highest of them (a recovered
//!   instance shows on its second fast answer); any other sample only moves it as an EWMA would
//!   (clamped to within [`MARGIN`] of the estimate, so one outlier weighs little), with a weight that grows with the time since the
//!   previous sample (the pool's `latency_decay`, [`crate::config::pools::LATENCY_DECAY`] by
//!   default). One or two noisy answers of a fast instance therefore do not make it look slow:
//!   a fast instance that looked slow would get no traffic to correct it, and its share would go
//!   to the slow instance (the "episodes" a peak-sensitive average shows).
//!   The estimate does **not** decay while no sample comes: an instance the balancer avoids is
//!   re-measured by bounded probes instead ([`InstanceLoad::claim_probe`], the pool's
//!   `probe_interval` and `probe_share`). An instance without samples starts at [`PRIOR`]. The
//!   sample is the time to the response head: a JSON answer's head comes when the work is done;
//!   a stream's head comes early and its length is the client's.
//! - **a ramp** for slow start: the instant from which an instance (new on reload, back from
//!   down, or at the end of an ejection) grows from [`RAMP_FLOOR`] to its full share.
//!
//! The state of an instance is an `Arc`, carried over a reload for instances that stay (same
//! name, same address): requests of the old generation release what they took from the same
//! counters the new one reads.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// How far from the estimate (as a factor) a sample must be to count in a run.
pub(crate) const MARGIN: f64 = 2.0;
/// Samples in a row above the estimate that raise it at once.
pub(crate) const RAISE_RUN: u8 = 3;
/// Samples in a row below the estimate that lower it at once.
pub(crate) const LOWER_RUN: u8 = 2;

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
    /// [`now_ns`] of the last probe sent to the instance (0: none).
    probed_at: AtomicU64,
    /// [`now_ns`] from which the instance ramps up ([`NOT_RAMPING`]: full share).
    ramp_from: AtomicU64,
}

#[derive(Debug, Clone, Copy)]
struct Ewma {
    /// Nanoseconds; `None` until the first sample.
    estimate: Option<f64>,
    /// The current run of samples on one side of the estimate: its length (positive above,
    /// negative below) and its lowest (above) or highest (below) sample, in nanoseconds.
    run: i8,
    run_edge: f64,
    /// [`now_ns`] of the last update (or of the instance's creation).
    at: u64,
}

impl Ewma {
    /// One sample `rtt` (ns) `elapsed` ns after the previous one: see the module docs.
    fn update(&mut self, rtt: f64, elapsed: u64, decay: Duration) {
        let Some(old) = self.estimate else {
            self.estimate = Some(rtt);
            return;
        };
        // Extend the run on this side of the estimate, or start one.
        (self.run, self.run_edge) = match (rtt > old * MARGIN, rtt * MARGIN < old) {
            (true, _) if self.run > 0 => (self.run + 1, self.run_edge.min(rtt)),
            (true, _) => (1, rtt),
            (_, true) if self.run < 0 => (self.run - 1, self.run_edge.max(rtt)),
            (_, true) => (-1, rtt),
            _ => (0, rtt),
        };
        let jump = self.run >= RAISE_RUN as i8 || -self.run >= LOWER_RUN as i8;
        self.estimate = Some(if jump {
            self.run = 0;
            self.run_edge
        } else {
            // Clamped: a lone outlier pulls no harder than a sample MARGIN times off would.
            let w = keep(elapsed, decay);
            old * w + rtt.clamp(old / MARGIN, old * MARGIN) * (1.0 - w)
        });
    }
}

impl Default for InstanceLoad {
    fn default() -> Self {
        InstanceLoad {
            in_flight: AtomicU32::new(0),
            ewma: Mutex::new(Ewma {
                estimate: None,
                run: 0,
                run_edge: 0.0,
                at: now_ns(),
            }),
            probed_at: AtomicU64::new(0),
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
        let elapsed = now.saturating_sub(e.at);
        e.update(rtt, elapsed, decay);
        e.at = e.at.max(now);
    }

    /// The latency estimate in nanoseconds, or [`PRIOR`] before any sample.
    pub(crate) fn latency_ns(&self) -> f64 {
        let e = self.ewma.lock().unwrap_or_else(|p| p.into_inner());
        e.estimate.unwrap_or(PRIOR.as_nanos() as f64)
    }

    /// The estimate, and whether the instance is due for a probe at `now`: neither a sample
    /// nor a probe for `interval`.
    pub(crate) fn estimate_at(&self, now: u64, interval: Duration) -> (f64, bool) {
        let (estimate, at) = {
            let e = self.ewma.lock().unwrap_or_else(|p| p.into_inner());
            (e.estimate.unwrap_or(PRIOR.as_nanos() as f64), e.at)
        };
        let seen = at.max(self.probed_at.load(Ordering::Relaxed));
        (
            estimate,
            now.saturating_sub(seen) >= interval.as_nanos() as u64,
        )
    }

    /// Take the instance's probe slot at `now` if it is still due (`interval` since its last
    /// sample or probe): exactly one of several requests that race for it wins, so an instance
    /// gets at most one probe per interval even when its probes never answer.
    pub(crate) fn claim_probe(&self, now: u64, interval: Duration) -> bool {
        let at = self.ewma.lock().unwrap_or_else(|p| p.into_inner()).at;
        let probed = self.probed_at.load(Ordering::Relaxed);
        let gap = interval.as_nanos() as u64;
        now.saturating_sub(at.max(probed)) >= gap
            && self
                .probed_at
                .compare_exchange(probed, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
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
    fn a_run_of_samples_moves_the_estimate_and_a_lone_one_barely_does() {
        let l = InstanceLoad::default();
        let t0 = now_ns();
        let d = LATENCY_DECAY;
        let ms = |v: f64| v * MS as f64;
        let at = |k: u64, v: u64| l.observe(Duration::from_millis(v), t0 + k * MS, d);
        assert_eq!(l.latency_ns(), PRIOR.as_nanos() as f64);
        at(0, 5);
        assert_eq!(l.latency_ns(), ms(5.0));
        // Two noisy answers in a row: they barely move it.
        at(1, 50);
        at(2, 60);
        assert!(l.latency_ns() < ms(5.05), "{}", l.latency_ns());
        // An ordinary one ends the run; a new run of three slow ones: the lowest, at once.
        at(3, 6);
        at(4, 45);
        at(5, 40);
        assert!(l.latency_ns() < ms(5.05), "{}", l.latency_ns());
        at(6, 42);
        assert_eq!(l.latency_ns(), ms(40.0));
        // Fast again: one fast answer barely moves it, the second brings it down at once.
        at(7, 5);
        assert!(l.latency_ns() > ms(39.9), "{}", l.latency_ns());
        at(8, 6);
        assert_eq!(l.latency_ns(), ms(6.0));
        // Samples within the margin never jump, however many: 8 ms three times only pulls.
        for k in 9..12 {
            at(k, 8);
        }
        assert!(l.latency_ns() < ms(6.01), "{}", l.latency_ns());
        // A lone sample after a long pause weighs more (the EWMA's time weighting), clamped
        // to twice the estimate: 6 × e^-1 + 12 × (1 - e^-1).
        at(10_011, 30);
        let v = l.latency_ns();
        assert!(v > ms(9.7) && v < ms(9.9), "{v}");
    }

    #[test]
    fn an_idle_estimate_stays_and_the_instance_is_due_for_one_probe_per_interval() {
        let l = InstanceLoad::default();
        let t0 = now_ns();
        let every = Duration::from_secs(2);
        l.observe(Duration::from_millis(100), t0, LATENCY_DECAY);
        assert_eq!(
            l.estimate_at(t0 + 1000 * MS, every),
            (100.0 * MS as f64, false)
        );
        assert!(!l.claim_probe(t0 + 1000 * MS, every));
        assert_eq!(
            l.estimate_at(t0 + 2000 * MS, every),
            (100.0 * MS as f64, true)
        );
        assert!(l.claim_probe(t0 + 2000 * MS, every));
        // Claimed: not due again until an interval later, even if the probe never answers.
        assert!(!l.claim_probe(t0 + 2000 * MS, every));
        assert!(!l.estimate_at(t0 + 3000 * MS, every).1);
        assert!(l.claim_probe(t0 + 4000 * MS, every));
        // A sample counts as seen.
        l.observe(Duration::from_millis(100), t0 + 5000 * MS, LATENCY_DECAY);
        assert!(!l.estimate_at(t0 + 6500 * MS, every).1);
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
