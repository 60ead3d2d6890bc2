//! Unit tests of instance selection: round robin, consistent hashing and its keys, retries
//! that skip tried instances, and task requests that go to their owner.

use super::*;
use crate::gateway::balance::stages::key::shard_key;
use crate::mcp::tasks::owner_hint;

#[test]
fn param_keys_hash_the_decoded_value() {
    let key = HashKey::Param(http::HeaderName::from_static("mcp-param-region"));
    let with = |v: &str| {
        let mut h = http::HeaderMap::new();
        h.insert("mcp-param-region", v.parse().unwrap());
        shard_key(&key, None, &h)
    };
    let wrapped = crate::mcp::header::encode_value("eu west ").into_owned();
    assert!(wrapped.starts_with("=?base64?"));
    assert_eq!(with(&wrapped), with("=?base64?ZXUgd2VzdCA=?="));
    assert_ne!(with("eu"), with("us"));
    assert_eq!(shard_key(&key, None, &http::HeaderMap::new()), None);
    assert_eq!(
        key.to_string(),
        "param:mcp-param-region".replace("mcp-param-", "")
    );
}
use std::collections::HashMap;

pub(super) fn cfg(n: usize, balance: Balance, key: Option<HashKey>) -> PoolConfig {
    PoolConfig {
        instances: (0..n).map(|i| format!("127.0.0.1:{}", 7001 + i)).collect(),
        balance,
        hash_key: key,
        load_bound: None,
        weights: Default::default(),
        slow_start: Duration::ZERO,
        latency_decay: crate::config::pools::LATENCY_DECAY,
        probe_interval: crate::config::pools::PROBE_INTERVAL,
        probe_share: crate::config::pools::PROBE_SHARE,
        health: Default::default(),
        ejection: Default::default(),
        outliers: None,
        tls: None,
        http: Default::default(),
        credentials: None,
        mrtr: Default::default(),
        era: Default::default(),
        legacy_clients: Default::default(),
        pins: Default::default(),
        concurrency: None,
    }
}

pub(super) fn pool(n: usize, balance: Balance, key: Option<HashKey>) -> Pool {
    Pool::build("p", &cfg(n, balance, key), None).unwrap()
}

#[test]
fn round_robin_spreads_evenly() {
    let p = pool(3, Balance::RoundRobin, None);
    let h = http::HeaderMap::new();
    let mut counts = [0; 3];
    for _ in 0..300 {
        counts[p.pick(None, &h).unwrap()] += 1;
    }
    assert_eq!(counts, [100, 100, 100]);
}

#[test]
fn hash_is_stable_spreads_and_moves_about_one_nth() {
    let five = pool(5, Balance::Hash, None);
    let four = pool(4, Balance::Hash, None);
    let h = http::HeaderMap::new();
    let keys: Vec<String> = (0..5000).map(|i| format!("tool_{i}")).collect();
    let on = |p: &Pool, k: &str| p.instances[p.pick(Some(k), &h).unwrap()].name.clone();
    let mut spread: HashMap<String, usize> = HashMap::new();
    let mut moved = 0;
    for k in &keys {
        let a = on(&five, k);
        assert_eq!(a, on(&five, k), "stable per key");
        let b = on(&four, k);
        if a != b {
            moved += 1;
            // Only keys of the removed instance move.
            assert_eq!(a, "127.0.0.1:7005", "{k} moved from a surviving instance");
        }
        *spread.entry(a).or_default() += 1;
    }
    assert_eq!(spread.len(), 5);
    for (inst, n) in &spread {
        assert!((500..=1600).contains(n), "{inst} got {n} of 5000 keys");
    }
    let share = moved as f64 / keys.len() as f64;
    assert!((0.1..=0.3).contains(&share), "moved {share}");
}

#[test]
fn excluding_tried_instances_finds_another_and_then_none() {
    let h = http::HeaderMap::new();
    for balance in [Balance::RoundRobin, Balance::Hash, Balance::LeastLoaded] {
        let p = pool(3, balance, None);
        let mut tried = Tried::default();
        for _ in 0..3 {
            let i = p.pick_excluding(Some("k"), &h, tried).unwrap();
            assert!(!tried.has(i));
            tried.add(i);
        }
        assert_eq!(tried.count(), 3);
        assert_eq!(p.pick_excluding(Some("k"), &h, tried), None);
    }
}

#[test]
fn task_requests_go_to_the_owner_named_by_their_id() {
    use crate::mcp::tasks::mint_task_id;
    let h = http::HeaderMap::new();
    for balance in [Balance::RoundRobin, Balance::Hash, Balance::LeastLoaded] {
        let p = pool(3, balance, None);
        for (i, inst) in p.instances.iter().enumerate() {
            for hint in &inst.task_hints {
                let id = mint_task_id(hint);
                for m in ["tasks/get", "tasks/update", "tasks/cancel"] {
                    for _ in 0..5 {
                        let got = p.pick_request(Some(m), Some(&id), &h, None, Tried::default());
                        assert_eq!(got.index, Some(i), "{m} {id}");
                        assert_eq!(got.task, Some(TaskRoute::Owner), "{m} {id}");
                    }
                }
                // Once the owner was tried (it could not be reached), no other instance.
                let mut tried = Tried::default();
                tried.add(i);
                let got = p.pick_request(Some("tasks/get"), Some(&id), &h, None, tried);
                assert_eq!(got.index, None);
                assert_eq!(got.task, Some(TaskRoute::OwnerUnreachable));
                // The same name on another method is balanced as usual.
                assert_eq!(
                    p.pick_request(Some("tools/call"), Some(&id), &h, None, tried)
                        .task,
                    None
                );
            }
        }
        let foreign = mint_task_id(&owner_hint("10.9.9.9:1"));
        let Picked {
            index: idx,
            task: route,
            ..
        } = p.pick_request(
            Some("tasks/get"),
            Some(&foreign),
            &h,
            None,
            Tried::default(),
        );
        assert!(idx.is_some());
        assert_eq!(route, Some(TaskRoute::UnknownOwner));
        let Picked {
            index: idx,
            task: route,
            ..
        } = p.pick_request(
            Some("tasks/get"),
            Some("plain-id"),
            &h,
            None,
            Tried::default(),
        );
        assert!(idx.is_some());
        assert_eq!(route, Some(TaskRoute::NoHint));
    }
}

#[test]
fn principal_and_header_keys() {
    let p = pool(4, Balance::Hash, Some(HashKey::Principal));
    let mut h = http::HeaderMap::new();
    h.insert("authorization", "Bearer alice".parse().unwrap());
    let a = p.pick(None, &h);
    for _ in 0..10 {
        assert_eq!(
            p.pick(Some("different-tool"), &h),
            a,
            "principal keys ignore the name"
        );
    }
    let p = pool(
        4,
        Balance::Hash,
        Some(HashKey::Header(http::HeaderName::from_static("x-tenant"))),
    );
    h.insert("x-tenant", "acme".parse().unwrap());
    let a = p.pick(None, &h);
    assert!((0..10).all(|_| p.pick(None, &h) == a));
    // Without the header, requests spread.
    let none = http::HeaderMap::new();
    let picks: std::collections::HashSet<_> = (0..50).map(|_| p.pick(None, &none)).collect();
    assert!(picks.len() > 1);
}

/// Simulate `picks` requests with `window` of them in flight at once (each pick starts one and
/// ends the oldest beyond the window), keyed by `key(n)`; returns the picks per instance and the
/// most any instance ever had in flight.
pub(super) fn simulate(
    p: &Pool,
    picks: usize,
    window: usize,
    key: impl Fn(usize) -> String,
    mut on_pick: impl FnMut(usize, usize, &Pool),
) -> Vec<usize> {
    let h = http::HeaderMap::new();
    let mut open = std::collections::VecDeque::new();
    let mut got = vec![0; p.instances.len()];
    for n in 0..picks {
        let k = key(n);
        let i = p.pick(Some(&k), &h).unwrap();
        p.loads[i].begin();
        on_pick(n, i, p);
        got[i] += 1;
        open.push_back(i);
        if open.len() > window {
            p.loads[open.pop_front().unwrap()].end();
        }
    }
    for i in open {
        p.loads[i].end();
    }
    got
}

#[test]
fn least_loaded_avoids_a_slow_instance_and_a_busy_one() {
    let p = pool(3, Balance::LeastLoaded, None);
    let now = load::now_ns();
    for (i, ms) in [(0, 1), (1, 1), (2, 10)] {
        p.loads[i].observe(Duration::from_millis(ms), now, p.decay);
    }
    let got = simulate(&p, 3000, 6, |_| String::new(), |_, _, _| {});
    assert!(got[2] < 150, "the 10x slower instance took {got:?}");
    assert!(got[0] > 1200 && got[1] > 1200, "{got:?}");
    // Equal latencies: in-flight decides, so a stuck instance (requests never finishing) is
    // left alone once it holds more than the others.
    let p = pool(3, Balance::LeastLoaded, None);
    (0..20).for_each(|_| p.loads[1].begin());
    let got = simulate(&p, 1000, 4, |_| String::new(), |_, _, _| {});
    assert_eq!(got[1], 0, "{got:?}");
}

#[test]
fn weights_scale_each_share() {
    let mut c = cfg(3, Balance::RoundRobin, None);
    c.weights.insert("127.0.0.1:7001".into(), 3);
    let p = Pool::build("p", &c, None).unwrap();
    let got = simulate(&p, 500, 1, |_| String::new(), |_, _, _| {});
    assert_eq!(got, [300, 100, 100]);
    c.balance = Balance::LeastLoaded;
    let p = Pool::build("p", &c, None).unwrap();
    let got = simulate(&p, 5000, 10, |_| String::new(), |_, _, _| {});
    assert!(got[0] > 2 * got[1] && got[0] > 2 * got[2], "{got:?}");
    c.balance = Balance::Hash;
    let p = Pool::build("p", &c, None).unwrap();
    let got = simulate(&p, 5000, 1, |n| format!("k{n}"), |_, _, _| {});
    assert!(got[0] > 2 * got[1] && got[0] > 2 * got[2], "{got:?}");
}

#[test]
fn slow_start_ramps_an_instance_added_on_reload() {
    let two = Pool::build("p", &cfg(2, Balance::RoundRobin, None), None).unwrap();
    let mut c = cfg(3, Balance::RoundRobin, None);
    c.slow_start = Duration::from_secs(60);
    let mut three = Pool::build("p", &c, None).unwrap();
    three.adopt_loads(Some(&two));
    assert!(
        Arc::ptr_eq(&three.loads[0], &two.loads[0]),
        "kept instances keep their load"
    );
    let got = simulate(&three, 3000, 1, |_| String::new(), |_, _, _| {});
    assert!(got[2] > 0 && got[2] < 300, "the new instance took {got:?}");
    // At the end of the window it takes its full share (a window already over).
    c.slow_start = Duration::from_nanos(1);
    let mut three = Pool::build("p", &c, None).unwrap();
    three.adopt_loads(Some(&two));
    let got = simulate(&three, 3000, 1, |_| String::new(), |_, _, _| {});
    assert_eq!(got, [1000, 1000, 1000]);
    // A recovered instance ramps too (least-loaded: its score is divided by the ramp).
    c.balance = Balance::LeastLoaded;
    c.slow_start = Duration::from_secs(60);
    let p = Pool::build("p", &c, None).unwrap();
    p.on_health(1, crate::gateway::stages::health::Change::CameUp);
    let got = simulate(&p, 3000, 6, |_| String::new(), |_, _, _| {});
    assert!(got[1] < got[0] / 2 && got[1] < got[2] / 2, "{got:?}");
}

#[test]
fn a_ramping_instance_that_is_the_only_one_left_is_still_picked() {
    let mut c = cfg(2, Balance::RoundRobin, None);
    c.slow_start = Duration::from_secs(60);
    let p = Pool::build("p", &c, None).unwrap();
    p.on_health(1, crate::gateway::stages::health::Change::CameUp);
    let h = http::HeaderMap::new();
    let mut tried = Tried::default();
    tried.add(0);
    assert!((0..200).all(|_| p.pick_excluding(None, &h, tried) == Some(1)));
}

#[test]
fn a_steered_retry_leg_leaves_its_flows_instances_in_every_mode() {
    let h = http::HeaderMap::new();
    let steer = Steer {
        previous: Some(1),
        first: Some(0),
    };
    for balance in [Balance::RoundRobin, Balance::LeastLoaded, Balance::Hash] {
        let p = pool(3, balance, None);
        for _ in 0..50 {
            let picked = p.pick_steered(
                Some("tools/call"),
                Some("hot"),
                &h,
                None,
                Tried::default(),
                steer,
            );
            assert_eq!(picked.index, Some(2), "{balance:?}");
            assert_eq!(picked.landing, Some(Landing::Elsewhere));
        }
        // With instance 2 already tried (its connect failed), leg 1's instance is next best.
        let mut tried = Tried::default();
        tried.add(2);
        let picked = p.pick_steered(Some("tools/call"), Some("hot"), &h, None, tried, steer);
        assert_eq!(
            (picked.index, picked.landing),
            (Some(0), Some(Landing::Elsewhere))
        );
        // Nothing else left: the previous instance, said so.
        tried.add(0);
        let picked = p.pick_steered(Some("tools/call"), Some("hot"), &h, None, tried, steer);
        assert_eq!(
            (picked.index, picked.landing),
            (Some(1), Some(Landing::Same))
        );
        // An unsteered request says nothing.
        let picked = p.pick_request(Some("tools/call"), Some("hot"), &h, None, Tried::default());
        assert_eq!(picked.landing, None);
    }
}
