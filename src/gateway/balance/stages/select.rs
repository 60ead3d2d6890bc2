//! The three selectors of a pool, as methods of [`Pool`]: least-loaded (power of two
//! choices), round robin (with slow start's skips) and consistent hashing (with the load
//! bound's walk along the ring). Which instances are eligible (untried, usable or panic mode) is
//! decided by the caller, [`Pool::pick_request`].

use pingora::lb::selection::{Consistent, RoundRobin};
use pingora::lb::{Backend, LoadBalancer};
use std::cell::Cell;
use std::sync::atomic::Ordering;

use super::{choice, Pool};

impl Pool {
    pub(super) fn index_of(&self, b: &Backend) -> Option<usize> {
        let addr = b.addr.as_inet()?;
        self.instances.iter().position(|i| i.addr == *addr)
    }

    /// Weight times slow-start ramp.
    pub(crate) fn effective_weight(&self, i: usize, now: u64) -> f64 {
        self.weights[i] * self.loads[i].ramp(now, self.slow_start)
    }

    /// Power of two choices on `latency × (in flight + 1) / effective weight`, and the probe
    /// rule: when the loser of the draw has had neither a sample nor a probe for
    /// `probe_interval`, and probes have been under `probe_share` of the pool's picks, the
    /// loser gets the request instead (`true`: a probe), so an avoided instance is measured
    /// again at a bounded cost instead of being re-admitted wholesale. The clock (`now`) and
    /// the randomness come from the caller.
    pub(crate) fn least_loaded(
        &self,
        eligible: &impl Fn(usize) -> bool,
        now: u64,
        rng: &mut impl rand::Rng,
    ) -> (Option<usize>, bool) {
        let picks = self.picks.fetch_add(1, Ordering::Relaxed) + 1;
        let look = |i: usize| {
            let l = &self.loads[i];
            let (latency, due) = l.estimate_at(now, self.probe_interval);
            let n = l.in_flight();
            (
                choice::score(latency, n, self.effective_weight(i, now)),
                n,
                due,
            )
        };
        let (a, b) = choice::draw_two(self.instances.len(), eligible, rng);
        let (Some(a), Some(b)) = (a, b) else {
            return (a, false);
        };
        let ((sa, na, due_a), (sb, nb, due_b)) = (look(a), look(b));
        let (winner, loser, loser_due) = match choice::second_wins(sa, sb, na == nb, rng.gen()) {
            true => (b, a, due_a),
            false => (a, b, due_b),
        };
        if loser_due
            && self.probe_budget(picks)
            && self.loads[loser].claim_probe(now, self.probe_interval)
        {
            self.last_probe.fetch_max(picks, Ordering::Relaxed);
            return (Some(loser), true);
        }
        (Some(winner), false)
    }

    /// Probes stay within `probe_share` of the picks: one may go once `1 / probe_share` picks
    /// have passed since the last (the first after as many picks).
    fn probe_budget(&self, picks: u64) -> bool {
        let gap = (1.0 / self.probe_share).ceil() as u64;
        picks.saturating_sub(self.last_probe.load(Ordering::Relaxed)) >= gap
    }

    /// Round robin; an instance ramping up is skipped with the chance it is not due. At most
    /// one candidate is skipped per request, so the walk stays short even when every instance
    /// ramps (after a reload that brought them all back at once).
    pub(super) fn round_robin(
        &self,
        lb: &LoadBalancer<RoundRobin>,
        eligible: &impl Fn(usize) -> bool,
        now: u64,
    ) -> Option<usize> {
        let skipped = Cell::new(false);
        let accept = |b: &Backend, _: bool| {
            self.index_of(b).filter(|&i| eligible(i)).is_some_and(|i| {
                let r = self.loads[i].ramp(now, self.slow_start);
                if r >= 1.0 || skipped.get() || rand::random::<f64>() < r {
                    return true;
                }
                skipped.set(true);
                false
            })
        };
        // The one skipped may have been the only eligible instance: then it is taken after all.
        let any = |b: &Backend, _: bool| self.index_of(b).is_some_and(eligible);
        let b = lb
            .select_with(b"", 256, accept)
            .or_else(|| skipped.get().then(|| lb.select_with(b"", 256, any))?)?;
        self.index_of(&b)
    }

    /// The key's home on the ring, or with a load bound the first instance from it with room.
    pub(super) fn hashed(
        &self,
        lb: &LoadBalancer<Consistent>,
        k: u64,
        eligible: &impl Fn(usize) -> bool,
        now: u64,
    ) -> (Option<usize>, bool) {
        let key = k.to_le_bytes();
        let Some(bound) = self.bound else {
            let accept = |b: &Backend, _: bool| self.index_of(b).is_some_and(eligible);
            return (
                lb.select_with(&key, 256, accept)
                    .and_then(|b| self.index_of(&b)),
                false,
            );
        };
        let (mut total, mut total_weight) = (0u64, 0.0);
        for i in (0..self.instances.len()).filter(|&i| eligible(i)) {
            total += u64::from(self.loads[i].in_flight());
            total_weight += self.effective_weight(i, now);
        }
        let home = Cell::new(None);
        let room = |b: &Backend, _: bool| {
            let Some(i) = self.index_of(b).filter(|&i| eligible(i)) else {
                return false;
            };
            if home.get().is_none() {
                home.set(Some(i));
            }
            let cap = choice::capacity(total, self.effective_weight(i, now), total_weight, bound);
            u64::from(self.loads[i].in_flight()) < cap
        };
        match lb
            .select_with(&key, 256, room)
            .and_then(|b| self.index_of(&b))
        {
            Some(i) => (Some(i), home.get() != Some(i)),
            // Every instance is at its bound (only with slow start): the home takes it.
            None => (home.get(), false),
        }
    }
}
