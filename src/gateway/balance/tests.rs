//! Unit tests of instance selection: round robin, consistent hashing and its keys, retries
//! that skip tried instances, and task requests that go to their owner.

use super::*;

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

fn pool(n: usize, balance: Balance, key: Option<HashKey>) -> Pool {
    let cfg = PoolConfig {
        instances: (0..n).map(|i| format!("127.0.0.1:{}", 7001 + i)).collect(),
        balance,
        hash_key: key,
        health: Default::default(),
        ejection: Default::default(),
        tls: None,
        http: Default::default(),
    };
    Pool::build("p", &cfg, None).unwrap()
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
    for balance in [Balance::RoundRobin, Balance::Hash] {
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
    for balance in [Balance::RoundRobin, Balance::Hash] {
        let p = pool(3, balance, None);
        for (i, inst) in p.instances.iter().enumerate() {
            for hint in &inst.task_hints {
                let id = mint_task_id(hint);
                for m in ["tasks/get", "tasks/update", "tasks/cancel"] {
                    for _ in 0..5 {
                        let got = p.pick_request(Some(m), Some(&id), &h, None, Tried::default());
                        assert_eq!(got, (Some(i), Some(TaskRoute::Owner)), "{m} {id}");
                    }
                }
                // Once the owner was tried (it could not be reached), no other instance.
                let mut tried = Tried::default();
                tried.add(i);
                let got = p.pick_request(Some("tasks/get"), Some(&id), &h, None, tried);
                assert_eq!(got, (None, Some(TaskRoute::OwnerUnreachable)));
                // The same name on another method is balanced as usual.
                assert_eq!(
                    p.pick_request(Some("tools/call"), Some(&id), &h, None, tried)
                        .1,
                    None
                );
            }
        }
        let foreign = mint_task_id(&owner_hint("10.9.9.9:1"));
        let (idx, route) = p.pick_request(
            Some("tasks/get"),
            Some(&foreign),
            &h,
            None,
            Tried::default(),
        );
        assert!(idx.is_some());
        assert_eq!(route, Some(TaskRoute::UnknownOwner));
        let (idx, route) = p.pick_request(
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
