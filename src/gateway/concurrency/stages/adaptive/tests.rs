//! The gradient's unit tests: samples fed by hand, time passed as values (no clock).
use super::*;

fn settings() -> Settings {
    Settings {
        min: 2,
        max: 200,
        tolerance: 1.5,
        window: Duration::from_millis(100),
        min_rtt_window: Duration::from_secs(10),
    }
}

const MS: Duration = Duration::from_millis(1);

#[test]
fn the_gradient_grows_near_the_best_and_falls_as_latency_rises() {
    let s = settings();
    // At its best and busy: grows by the tolerance.
    assert_eq!(next_limit(10.0, &s, 10 * MS, 10 * MS, true, false), 15.0);
    // Not busy: nothing measured the top, the limit stays.
    assert_eq!(next_limit(10.0, &s, 10 * MS, 10 * MS, false, false), 10.0);
    // Exactly tolerance × slower: stays.
    assert_eq!(next_limit(10.0, &s, 10 * MS, 15 * MS, true, false), 10.0);
    // Twice as slow as allowed: halves; far slower: no more than halves.
    assert_eq!(next_limit(10.0, &s, 10 * MS, 30 * MS, true, false), 5.0);
    assert_eq!(next_limit(10.0, &s, 10 * MS, 1000 * MS, false, false), 5.0);
    // Failures: 90%, whatever the latency; never below min, never above max.
    assert_eq!(next_limit(10.0, &s, 10 * MS, 10 * MS, true, true), 9.0);
    assert_eq!(next_limit(2.0, &s, 10 * MS, 90 * MS, true, false), 2.0);
    assert_eq!(next_limit(180.0, &s, 10 * MS, 10 * MS, true, false), 200.0);
}

/// A pool of capacity `cap` with service time `base`: with `n` in flight, an answer takes
/// `base` up to capacity, and `base × n / cap` past it (the rest queue).
fn latency(base: Duration, cap: u32, n: u32) -> Duration {
    base.mul_f64(f64::from(n.max(cap)) / f64::from(cap))
}

/// Drive the limit as a saturated pool would: each window, as many in flight as the limit
/// allows (the offered load is far above it), answers at the latency that load gives.
fn run(g: &mut Gradient, cap: u32, base: Duration, windows: usize, t: &mut Instant) -> Vec<u32> {
    let mut seen = Vec::new();
    for _ in 0..windows {
        let n = g.first_leg_limit();
        for _ in 0..MIN_SAMPLES * 4 {
            *t += Duration::from_millis(13);
            if g.sample(latency(base, cap, n), n, false, *t) {
                break;
            }
        }
        seen.push(g.limit());
    }
    seen
}

/// The same, with the answers a window sees lagging one window's worth of samples behind
/// the limit (each window closes on an answer admitted under the next limit).
fn run_lagging(g: &mut Gradient, cap: u32, windows: usize, t: &mut Instant) -> Vec<u32> {
    let mut seen = Vec::new();
    for _ in 0..windows {
        let n = g.first_leg_limit();
        for _ in 0..MIN_SAMPLES {
            *t += Duration::from_millis(13);
            g.sample(latency(10 * MS, cap, n), n, false, *t);
        }
        seen.push(g.limit());
    }
    seen
}

#[test]
fn under_overload_the_limit_settles_between_capacity_and_tolerance_times_it() {
    let mut g = Gradient::new(settings(), 4);
    let mut t = Instant::now();
    let seen = run(&mut g, 40, 10 * MS, 60, &mut t);
    let settled = &seen[20..];
    assert!(
        settled.iter().all(|&l| (40..=75).contains(&l)),
        "capacity 40, tolerance 1.5: {seen:?}"
    );
    assert_eq!(g.min_rtt(), Some(10 * MS));
    // Answers that lag the limit make it swing, but never below the capacity: the pool
    // stays busy (goodput), and it queues at most 1.5 capacities.
    let mut g = Gradient::new(settings(), 4);
    let seen = run_lagging(&mut g, 40, 60, &mut t);
    assert!(
        seen[20..].iter().all(|&l| (40..=100).contains(&l)),
        "{seen:?}"
    );
}

#[test]
fn a_pool_that_becomes_slower_brings_the_limit_down_and_back_up() {
    let mut g = Gradient::new(settings(), 4);
    let mut t = Instant::now();
    run(&mut g, 40, 10 * MS, 30, &mut t);
    // Capacity halves (an instance lost): the limit follows within a few windows.
    let seen = run(&mut g, 20, 10 * MS, 30, &mut t);
    assert!(
        seen[10..].iter().all(|&l| (20..=38).contains(&l)),
        "{seen:?}"
    );
    let seen = run(&mut g, 40, 10 * MS, 30, &mut t);
    assert!(seen[15..].iter().all(|&l| l >= 40), "{seen:?}");
}

#[test]
fn one_noisy_answer_in_a_window_does_not_move_the_limit() {
    let mut g = Gradient::new(settings(), 20);
    let mut t = Instant::now();
    for i in 0..MIN_SAMPLES * 3 {
        t += Duration::from_millis(13);
        let rtt = if i == 12 { 500 * MS } else { 10 * MS };
        g.sample(rtt, 5, false, t);
    }
    assert_eq!(
        g.limit(),
        20,
        "not busy (5 of 20): no growth, and the outlier is not the median"
    );
}

#[test]
fn a_quiet_pool_is_never_probed_and_its_best_follows_it_up() {
    let mut g = Gradient::new(settings(), 40);
    let mut t = Instant::now();
    // 26 s of answers with 3 of 40 in flight, 10 ms and then (a slower release) 30 ms.
    for i in 0..2000 {
        t += Duration::from_millis(13);
        let rtt = if i < 1000 { 10 * MS } else { 30 * MS };
        g.sample(rtt, 3, false, t);
        assert!(
            !g.probing(),
            "a probe sheds new calls; a quiet pool needs none"
        );
    }
    assert_eq!((g.min_rtt(), g.limit()), (Some(30 * MS), 40));
}

#[test]
fn failures_cut_the_limit() {
    let mut g = Gradient::new(settings(), 100);
    let mut t = Instant::now();
    // The first window closes once `window` has passed since its first answer (the 9th).
    for _ in 0..=MIN_SAMPLES {
        t += Duration::from_millis(13);
        g.sample(10 * MS, 100, true, t);
    }
    assert_eq!(g.limit(), 90);
}

#[test]
fn the_best_latency_is_measured_again_by_a_probe_at_min() {
    let mut g = Gradient::new(settings(), 4);
    let mut t = Instant::now();
    run(&mut g, 40, 10 * MS, 30, &mut t);
    let before = g.limit();
    // The pool's own best rises to 20 ms for good; steady overload keeps every answer
    // queued, so only a probe can tell.
    let mut probed = false;
    for _ in 0..200 {
        let n = g.first_leg_limit();
        probed |= g.probing();
        for _ in 0..MIN_SAMPLES {
            t += Duration::from_millis(13);
            g.sample(latency(20 * MS, 40, n), n, false, t);
        }
    }
    assert!(probed, "a probe ran within min_rtt_window");
    assert_eq!(g.min_rtt(), Some(20 * MS), "measured again");
    assert!(
        (40..=75).contains(&g.limit()),
        "settled again: {} (was {before})",
        g.limit()
    );
    // While probing, new calls get min; the limit itself is kept.
    g.probe = Some((t, Vec::new()));
    assert_eq!((g.first_leg_limit(), g.limit() >= 40), (2, true));
    // A probe that gets no quiet answers gives up after two windows.
    t += Duration::from_millis(250);
    assert!(g.sample(30 * MS, 50, false, t));
    assert!(!g.probing());
}
