//! Unit tests of the latency outlier detector: the verdict over fed numbers ([`judge`]), and a
//! pool fed answers at given instants (no clock read by the assertions): the window, the
//! ejection it makes, and every balancing mode skipping the ejected instance.

use super::*;
use crate::config::{Balance, PoolConfig};
use crate::gateway::balance::stages::Tried;

const MS: f64 = 1e6;

fn cfg() -> OutlierConfig {
    OutlierConfig {
        min_samples: 5,
        ..OutlierConfig::default()
    }
}

fn seen(ms: &[f64]) -> Vec<Seen> {
    (ms.iter())
        .map(|&m| Seen {
            latency_ns: m * MS,
            samples: 20,
            usable: true,
        })
        .collect()
}

#[test]
fn one_instance_ten_times_slower_than_the_median_is_ejected() {
    let j = judge(&seen(&[2.0, 2.2, 20.0]), &cfg());
    assert_eq!(j.eject, vec![2]);
    assert_eq!(j.clear, vec![0, 1]);
    assert_eq!(j.baseline_ns, Some(2.2 * MS));
    // Three times the median is not "more than three times".
    let j = judge(&seen(&[10.0, 10.0, 30.0]), &cfg());
    assert!(j.eject.is_empty() && j.clear.len() == 3, "{j:?}");
}

#[test]
fn a_small_gap_is_no_outlier_however_large_the_ratio() {
    // 8x the median, but only 7 ms above it (min_gap 10ms).
    let j = judge(&seen(&[1.0, 1.0, 8.0]), &cfg());
    assert!(j.eject.is_empty(), "{j:?}");
    let gapless = OutlierConfig {
        min_gap: Duration::ZERO,
        ..cfg()
    };
    assert_eq!(judge(&seen(&[1.0, 1.0, 8.0]), &gapless).eject, vec![2]);
}

#[test]
fn instances_with_too_few_answers_are_neither_judged_nor_the_baseline() {
    let mut s = seen(&[2.0, 2.0, 20.0]);
    s[2].samples = 4;
    let j = judge(&s, &cfg());
    assert!(j.eject.is_empty() && j.clear == vec![0, 1], "{j:?}");
    // One instance judged alone has nobody to be compared with.
    s[1].samples = 0;
    assert_eq!(judge(&s, &cfg()), Judged::default());
    // Nor is an instance already out of the pool.
    let mut s = seen(&[2.0, 2.0, 20.0]);
    s[2].usable = false;
    assert!(judge(&s, &cfg()).eject.is_empty());
}

#[test]
fn the_median_is_not_fooled_by_a_fast_failing_instance() {
    // One instance answers errors in 0.1 ms: against the median, the others are fine...
    let j = judge(&seen(&[0.1, 20.0, 22.0]), &cfg());
    assert!(j.eject.is_empty(), "{j:?}");
    // ...against the fastest they would all be outliers, and the cap keeps one.
    let fastest = OutlierConfig {
        baseline: 0.0,
        ..cfg()
    };
    assert_eq!(judge(&seen(&[0.1, 20.0, 22.0]), &fastest).eject, vec![2]);
}

#[test]
fn a_slow_majority_is_ejected_only_as_far_as_the_cap_allows() {
    let fastest = |pct| OutlierConfig {
        baseline: 0.0,
        max_ejected_percent: pct,
        ..cfg()
    };
    let two_slow = seen(&[2.0, 25.0, 20.0]);
    // The median of [2, 20, 25] is slow itself: nobody is an outlier.
    assert!(judge(&two_slow, &cfg()).eject.is_empty());
    // Against the fastest both are; 34% of three is one: the slowest goes.
    assert_eq!(judge(&two_slow, &fastest(34)).eject, vec![1]);
    // 10% of three rounds to none, and one may always be ejected.
    assert_eq!(judge(&two_slow, &fastest(10)).eject, vec![1]);
    // 100%: both, never the last usable instance.
    assert_eq!(judge(&two_slow, &fastest(100)).eject, vec![1, 2]);
    assert_eq!(judge(&seen(&[2.0, 25.0]), &fastest(100)).eject, vec![1]);
    // An instance out of the pool for another reason uses the budget up.
    let mut s = seen(&[2.0, 25.0, 20.0, 2.0]);
    s[3].usable = false;
    assert!(judge(&s, &fastest(34)).eject.is_empty());
    // Of four, the lower median (the second fastest) is the baseline.
    let four = seen(&[2.0, 2.0, 30.0, 40.0]);
    assert_eq!(judge(&four, &fastest(50)).eject, vec![3, 2]);
    assert_eq!(
        judge(
            &four,
            &OutlierConfig {
                max_ejected_percent: 50,
                ..cfg()
            }
        )
        .eject,
        vec![3, 2]
    );
}

fn pool(balance: Balance) -> Pool {
    let y = "instances: [\"127.0.0.1:7001\", \"127.0.0.1:7002\", \"127.0.0.1:7003\"]\n\
             health: {check: off}\n\
             outliers: {min_samples: 5, interval: 1s, base_ejection: 60s}\n";
    let mut c: PoolConfig = serde_yaml::from_str(y).unwrap();
    c.balance = balance;
    Pool::build("p", &c, None).unwrap()
}

/// Feed `rounds` answers to every instance, at `at` (ns) plus one ms a round: 2 ms from the
/// first two, `slow` ms from the third. The ejections the last answer's window made.
fn feed(p: &Pool, at: u64, rounds: u64, slow: u64) -> Vec<Ejection> {
    let mut made = Vec::new();
    for r in 0..rounds {
        for (i, ms) in [2, 2, slow].into_iter().enumerate() {
            let now = at + r * 1_000_000;
            p.loads[i].observe(Duration::from_millis(ms), now, p.decay);
            made.extend(p.outlier_sample(i, now));
        }
    }
    made
}

#[test]
fn a_window_ends_with_the_slow_instance_ejected_and_every_mode_skips_it() {
    let h = http::HeaderMap::new();
    for balance in [Balance::RoundRobin, Balance::Hash, Balance::LeastLoaded] {
        let p = pool(balance);
        let t0 = super::super::load::now_ns();
        // Within the first window: counted, not judged.
        assert!(feed(&p, t0, 10, 20).is_empty());
        assert!(p.health.usable(2));
        // The first answer after the window's end judges the pool.
        let made = feed(&p, t0 + 1_000_000_000, 1, 20);
        assert_eq!(made.len(), 1, "{balance:?}: {made:?}");
        let e = made[0];
        assert_eq!((e.index, e.time), (2, Duration::from_secs(60)));
        assert_eq!((e.latency_ns, e.baseline_ns), (20.0 * MS, 2.0 * MS));
        assert!(!p.health.usable(2));
        let why = p.health.unusable(2).unwrap().to_string();
        assert!(why.starts_with("ejected as a latency outlier"), "{why}");
        assert!(p
            .health
            .outlier_for(2)
            .is_some_and(|d| d > Duration::from_secs(50)));
        // Every mode, every key: never the ejected instance while another is usable.
        for k in 0..200 {
            let key = format!("tool_{k}");
            let i = p.pick(Some(&key), &h).unwrap();
            assert_ne!(i, 2, "{balance:?} sent {key} to the ejected instance");
        }
        // Panic mode: when nothing else is left, the ejected instance still serves.
        let mut tried = Tried::default();
        tried.add(0);
        tried.add(1);
        assert_eq!(p.pick_excluding(Some("k"), &h, tried), Some(2));
    }
}

#[test]
fn a_hash_key_homed_on_an_ejected_instance_moves_and_comes_back() {
    let p = pool(Balance::Hash);
    let h = http::HeaderMap::new();
    let homed: Vec<String> = (0..300)
        .map(|k| format!("tool_{k}"))
        .filter(|k| p.pick(Some(k), &h) == Some(2))
        .collect();
    assert!(homed.len() > 30, "{}", homed.len());
    p.health
        .eject_outlier(2, Duration::from_secs(60), Duration::from_secs(60));
    let away: Vec<usize> = homed.iter().map(|k| p.pick(Some(k), &h).unwrap()).collect();
    assert!(away.iter().all(|&i| i != 2), "{away:?}");
    // The ejection ends without waiting for it: down and back up through its active checks,
    // which clears it (a recovered instance starts with a clean slate).
    for ok in [false, false, true, true] {
        p.health.on_check(2, ok);
    }
    assert!(homed.iter().all(|k| p.pick(Some(k), &h) == Some(2)));
}

#[test]
fn ejections_in_a_row_grow_and_clean_windows_bring_them_back_down() {
    let p = pool(Balance::RoundRobin);
    let (base, max) = (Duration::from_secs(1), Duration::from_secs(5));
    let times: Vec<u64> = (0..4)
        .map(|_| p.health.eject_outlier(1, base, max).as_secs())
        .collect();
    assert_eq!(times, vec![1, 2, 4, 5]);
    // Four clean verdicts later, back to the base time.
    for _ in 0..4 {
        p.health.outlier_cleared(1);
    }
    assert_eq!(p.health.eject_outlier(1, base, max), base);
}

#[test]
fn a_pool_without_outliers_counts_nothing() {
    let c: PoolConfig =
        serde_yaml::from_str("instances: [\"127.0.0.1:7001\", \"127.0.0.1:7002\"]").unwrap();
    let p = Pool::build("p", &c, None).unwrap();
    assert!(p.outliers.is_none());
    let t = super::super::load::now_ns() + 3_600_000_000_000;
    assert!(p.outlier_sample(0, t).is_empty());
}
