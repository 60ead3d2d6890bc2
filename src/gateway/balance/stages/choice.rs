//! Choice: the arithmetic of the load-aware choices, on plain numbers (no pool, no clock), so
//! each rule is tested alone with a seeded RNG.
//!
//! - [`draw_two`] and [`score`]: power of two choices (Mitzenmacher; linkerd2-proxy's and
//!   Finagle's balancer). Two distinct eligible instances are drawn at random and the one with
//!   the lower score wins; comparing two instead of scanning all keeps the choice O(1), and the
//!   randomness keeps many gateway replicas from herding onto the same "best" instance.
//! - [`capacity`]: consistent hashing with bounded loads (Mirrokni, Thorup, Zadimoghaddam;
//!   HAProxy's `hash-balance-factor`). An instance may hold at most `(1 + bound)` times its
//!   weighted share of the pool's in-flight requests (this one included); a key whose home is
//!   full walks the ring to the next instance with room.

use rand::Rng;

/// The score of an instance for power of two choices: expected latency times the requests it
/// would have with this one, over its effective weight (weight times slow-start ramp).
pub(crate) fn score(latency_ns: f64, in_flight: u32, weight: f64) -> f64 {
    latency_ns.max(1.0) * (f64::from(in_flight) + 1.0) / weight.max(f64::MIN_POSITIVE)
}

/// Scores closer than this factor, of instances with as many requests in flight, are a tie,
/// settled by a coin: otherwise, with few requests in flight, the instance whose estimate is a
/// little lower (by noise) would win every draw, and the one a little higher would get no
/// traffic to correct it. Instances with different requests in flight are compared strictly:
/// a multiple of a fast latency is no reason to send a coin's share to a slow instance.
pub(crate) const TIE: f64 = 1.3;

/// Of two scores, is the second the better one? Lower wins, unless `alike` (as many in flight)
/// and the two are within [`TIE`] of each other: then `coin` decides.
pub(crate) fn second_wins(a: f64, b: f64, alike: bool, coin: bool) -> bool {
    if alike && a.max(b) < a.min(b) * TIE {
        coin
    } else {
        b < a
    }
}

/// Two distinct indices in `0..n` for which `eligible` holds, drawn at random: `(None, None)`
/// when none is, `(Some(a), None)` when only one is. Allocation-free: random draws first, then
/// a scan from a random offset when the eligible ones are rare.
pub(crate) fn draw_two(
    n: usize,
    eligible: impl Fn(usize) -> bool,
    rng: &mut impl Rng,
) -> (Option<usize>, Option<usize>) {
    if n == 0 {
        return (None, None);
    }
    let first = draw(n, &eligible, rng, None);
    let second = first.and_then(|a| draw(n, &eligible, rng, Some(a)));
    (first, second)
}

/// One eligible index other than `not`.
fn draw(
    n: usize,
    eligible: &impl Fn(usize) -> bool,
    rng: &mut impl Rng,
    not: Option<usize>,
) -> Option<usize> {
    let ok = |i: usize| Some(i) != not && eligible(i);
    for _ in 0..4 {
        let i = rng.gen_range(0..n);
        if ok(i) {
            return Some(i);
        }
    }
    let start = rng.gen_range(0..n);
    (0..n).map(|k| (start + k) % n).find(|&i| ok(i))
}

/// The most requests an instance may hold once it takes this one, with `total` in flight over
/// the pool's eligible instances, its effective `weight` out of `total_weight` and the pool's
/// `bound` (ε): `floor((1 + ε) × (total + 1) × weight / total_weight)`, at least 1 so an idle
/// instance always has room. Rounded down (the paper rounds up): then no instance ever holds
/// more than `1 + ε` times its share, which is what `load_bound` promises. When rounding
/// leaves no instance with room, the caller sends the request home.
pub(crate) fn capacity(total: u64, weight: f64, total_weight: f64, bound: f64) -> u64 {
    if total_weight <= 0.0 {
        return 1;
    }
    let share = (1.0 + bound) * (total as f64 + 1.0) * weight / total_weight;
    (share.floor() as u64).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    #[test]
    fn two_choices_are_distinct_and_eligible() {
        let mut rng = StdRng::seed_from_u64(7);
        for _ in 0..1000 {
            let (a, b) = draw_two(5, |i| i != 2, &mut rng);
            let (a, b) = (a.unwrap(), b.unwrap());
            assert_ne!(a, b);
            assert!(a != 2 && b != 2);
        }
        assert_eq!(draw_two(3, |i| i == 1, &mut rng), (Some(1), None));
        assert_eq!(draw_two(3, |_| false, &mut rng), (None, None));
        assert_eq!(draw_two(0, |_| true, &mut rng), (None, None));
    }

    #[test]
    fn every_instance_is_drawn_about_equally() {
        let mut rng = StdRng::seed_from_u64(1);
        let mut seen = [0u32; 4];
        for _ in 0..40_000 {
            let (a, b) = draw_two(4, |_| true, &mut rng);
            seen[a.unwrap()] += 1;
            seen[b.unwrap()] += 1;
        }
        for s in seen {
            assert!((19_000..21_000).contains(&s), "{seen:?}");
        }
    }

    #[test]
    fn a_slow_or_busy_instance_scores_worse_and_weight_divides() {
        let ms = 1e6;
        assert!(score(10.0 * ms, 0, 1.0) > score(1.0 * ms, 3, 1.0));
        assert!(score(1.0 * ms, 9, 1.0) > score(1.0 * ms, 3, 1.0));
        assert_eq!(score(2.0 * ms, 1, 2.0), score(1.0 * ms, 1, 1.0));
        // A ramping instance (weight 0.1) looks ten times busier.
        assert_eq!(score(ms, 0, 0.1), 10.0 * score(ms, 0, 1.0));
    }

    #[test]
    fn power_of_two_choices_starves_the_slow_one_of_most_traffic() {
        // Three instances, the third ten times slower, each request finishing before the next
        // (in flight 0): the slow one only wins when drawn against nobody faster, never.
        let mut rng = StdRng::seed_from_u64(3);
        let lat = [1e6, 1e6, 1e7];
        let mut got = [0u32; 3];
        for _ in 0..3000 {
            let (a, b) = draw_two(3, |_| true, &mut rng);
            let (a, b) = (a.unwrap(), b.unwrap());
            let pick = if score(lat[b], 0, 1.0) < score(lat[a], 0, 1.0) {
                b
            } else {
                a
            };
            got[pick] += 1;
        }
        assert_eq!(got[2], 0, "{got:?}");
        assert!(got[0] > 1200 && got[1] > 1200, "{got:?}");
    }

    #[test]
    fn close_scores_are_a_tie_and_far_ones_are_not() {
        // Within 1.3x: the coin decides, either way.
        assert!(second_wins(2.0, 2.4, true, true) && !second_wins(2.0, 2.4, true, false));
        assert!(second_wins(2.4, 2.0, true, true) && !second_wins(2.4, 2.0, true, false));
        // Beyond: the lower score wins whatever the coin.
        assert!(!second_wins(2.0, 20.0, true, true) && second_wins(20.0, 2.0, true, false));
        assert!(second_wins(4.0, 2.0, true, false));
        // Different requests in flight: strictly, however close.
        assert!(!second_wins(2.0, 2.4, false, true) && second_wins(2.4, 2.0, false, false));
    }

    #[test]
    fn capacity_is_the_bounded_weighted_share() {
        // 3 equal instances, 8 in flight, ε = 0.25: floor(1.25 × 9 / 3) = 3.
        assert_eq!(capacity(8, 1.0, 3.0, 0.25), 3);
        // A double weight gets a double share: floor(1.25 × 9 × 2 / 4) = 5.
        assert_eq!(capacity(8, 2.0, 4.0, 0.25), 5);
        assert_eq!(capacity(11, 1.0, 3.0, 0.25), 5);
        // An idle pool always has room.
        assert_eq!(capacity(0, 1.0, 100.0, 0.25), 1);
        assert_eq!(capacity(5, 1.0, 0.0, 0.25), 1);
    }
}
