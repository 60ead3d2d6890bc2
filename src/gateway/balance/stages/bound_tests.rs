//! Unit tests of bounded-load hashing (`load_bound`): a skewed (Zipf) key set keeps every
//! instance under its bound while most keys stay home, and a key leaves a full home and comes
//! back once it drains.

use super::tests::{cfg, simulate};
use super::*;

/// A Zipf(1.1) draw over `n` keys from a uniform `u` in [0, 1).
fn zipf(n: usize, u: f64) -> usize {
    let w: Vec<f64> = (1..=n).map(|k| 1.0 / (k as f64).powf(1.1)).collect();
    let total: f64 = w.iter().sum();
    let mut acc = 0.0;
    for (k, x) in w.iter().enumerate() {
        acc += x / total;
        if u < acc {
            return k;
        }
    }
    n - 1
}

#[test]
fn bounded_hashing_caps_every_instance_and_keeps_most_keys_home() {
    use rand::{Rng, SeedableRng};
    let mut c = cfg(3, Balance::Hash, None);
    let unbounded = Pool::build("p", &c, None).unwrap();
    c.load_bound = Some(0.25);
    let bounded = Pool::build("p", &c, None).unwrap();
    let keys: Vec<String> = {
        let mut rng = rand::rngs::StdRng::seed_from_u64(11);
        (0..6000)
            .map(|_| format!("tool_{}", zipf(200, rng.gen())))
            .collect()
    };
    let window = 24;
    let h = http::HeaderMap::new();
    let home = |k: &str| unbounded.pick(Some(k), &h);
    let run = |p: &Pool| {
        let (mut worst, mut stayed) = (0, 0);
        simulate(
            p,
            keys.len(),
            window,
            |n| keys[n].clone(),
            |n, i, p| {
                worst = worst.max(p.loads[i].in_flight());
                stayed += usize::from(home(&keys[n]) == Some(i));
            },
        );
        (worst, stayed as f64 / keys.len() as f64)
    };
    let (free, _) = run(&unbounded);
    let (capped, stayed) = run(&bounded);
    // 25 in flight counting the new one: floor(1.25 × 25 / 3) = 10.
    assert!(capped <= 10, "bounded pool let one instance hold {capped}");
    assert!(
        free > 14,
        "the skew should overload one instance unbounded ({free})"
    );
    assert!(stayed > 0.6, "only {stayed} of the keys stayed home");
    // With nothing in flight every key is home.
    assert!(keys.iter().all(|k| bounded.pick(Some(k), &h) == home(k)));
}

#[test]
fn a_key_moves_off_a_full_home_and_comes_back_when_it_drains() {
    let mut c = cfg(3, Balance::Hash, None);
    c.load_bound = Some(0.25);
    let p = Pool::build("p", &c, None).unwrap();
    let h = http::HeaderMap::new();
    let home = p.pick(Some("hot"), &h).unwrap();
    // The home holds 5 of 6 in flight: over floor(1.25 × 7 / 3) = 2.
    (0..5).for_each(|_| p.loads[home].begin());
    p.loads[(home + 1) % 3].begin();
    let picked = p.pick_request(Some("tools/call"), Some("hot"), &h, None, Tried::default());
    assert!(picked.moved);
    assert_ne!(picked.index, Some(home));
    (0..5).for_each(|_| p.loads[home].end());
    let picked = p.pick_request(Some("tools/call"), Some("hot"), &h, None, Tried::default());
    assert_eq!((picked.index, picked.moved), (Some(home), false));
}
