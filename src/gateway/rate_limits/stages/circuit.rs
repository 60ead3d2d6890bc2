//! The circuit breaker in front of Redis (`redis.circuit`): after `failures` errors in a row,
//! Redis is not asked for `open_for`; then one request probes, and its success closes it.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Consecutive failures open the circuit for a while; then one probe may close it again.
pub(crate) struct Circuit {
    threshold: u32,
    open_for_ms: u64,
    failures: AtomicU32,
    /// Milliseconds since the process clock's start until which Redis is not asked.
    open_until_ms: AtomicU64,
}

pub(crate) fn now_ms() -> u64 {
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_millis() as u64
}

impl Circuit {
    pub(crate) fn new(threshold: u32, open_for: Duration) -> Circuit {
        Circuit {
            threshold: threshold.max(1),
            open_for_ms: open_for.as_millis() as u64,
            failures: AtomicU32::new(0),
            open_until_ms: AtomicU64::new(0),
        }
    }

    /// Whether a request may ask Redis at `now` (milliseconds).
    pub(crate) fn allow(&self, now: u64) -> bool {
        if self.failures.load(Ordering::Relaxed) < self.threshold {
            return true;
        }
        let until = self.open_until_ms.load(Ordering::Relaxed);
        // Open: nobody asks. Past the deadline: the one who moves it probes, the rest wait.
        now >= until
            && self
                .open_until_ms
                .compare_exchange(
                    until,
                    now + self.open_for_ms,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                )
                .is_ok()
    }

    pub(crate) fn success(&self) {
        self.failures.store(0, Ordering::Relaxed);
    }

    pub(crate) fn failure(&self, now: u64) {
        let n = self.failures.fetch_add(1, Ordering::Relaxed) + 1;
        if n == self.threshold {
            self.open_until_ms
                .store(now + self.open_for_ms, Ordering::Relaxed);
        }
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.failures.load(Ordering::Relaxed) < self.threshold
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_circuit_opens_after_repeated_failures_and_one_probe_closes_it() {
        let c = Circuit::new(3, Duration::from_millis(100));
        assert!(c.allow(0));
        c.failure(0);
        c.failure(1);
        assert!(c.allow(2), "two failures: still closed");
        c.failure(2);
        assert!(!c.allow(3) && !c.allow(101), "open for 100 ms");
        assert!(c.allow(102), "the first request after the pause probes");
        assert!(!c.allow(103), "...and only that one");
        c.failure(103);
        assert!(!c.allow(150), "a failed probe keeps it open");
        assert!(c.allow(203));
        c.success();
        assert!(c.is_closed() && c.allow(204) && c.allow(205));
    }
}
