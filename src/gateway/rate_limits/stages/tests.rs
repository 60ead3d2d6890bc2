//! Unit tests of the limit stage (no sockets, no Redis: a global limit without a store).

use super::*;
use futures::executor::block_on;

fn limit(yaml: &str) -> Limit {
    let cfg = Config::parse(
        &format!("pools:\n  d: {{instances: [127.0.0.1:1]}}\nrate_limits:\n{yaml}"),
        "t",
    )
    .unwrap();
    Limit::new(&cfg.rate_limits[0])
}

fn check(l: &Limit, i: &LimitInput) -> Verdict {
    block_on(l.check(i))
}

fn input<'a>(name: Option<&'a str>, h: &'a http::HeaderMap) -> LimitInput<'a> {
    LimitInput {
        route: "r",
        method: Some("tools/call"),
        name,
        headers: h,
        client_ip: None,
        identity: None,
    }
}

#[test]
fn burst_then_limited_with_a_retry_after() {
    let l = limit("  - {name: l, key: [name], rate: 1/m, burst: 3}\n");
    let h = http::HeaderMap::new();
    for _ in 0..3 {
        assert_eq!(check(&l, &input(Some("a"), &h)), Verdict::Allowed);
    }
    match check(&l, &input(Some("a"), &h)) {
        Verdict::Limited(d) => assert!((19..=60).contains(&retry_after_secs(d)), "{d:?}"),
        v => panic!("{v:?}"),
    }
    // Another key is not limited.
    assert_eq!(check(&l, &input(Some("b"), &h)), Verdict::Allowed);
}

#[test]
fn dry_run_counts_but_never_limits() {
    let l = limit("  - {name: l, key: [name], rate: 1/h, burst: 1, dry_run: true}\n");
    let h = http::HeaderMap::new();
    assert_eq!(check(&l, &input(Some("a"), &h)), Verdict::Allowed);
    assert_eq!(check(&l, &input(Some("a"), &h)), Verdict::DryRunLimited);
}

#[test]
fn matchers_select_requests() {
    let l = limit("  - {name: l, match: {name: deploy_*}, key: [name], rate: 1/h, burst: 1}\n");
    let h = http::HeaderMap::new();
    assert_eq!(
        check(&l, &input(Some("lookup"), &h)),
        Verdict::NotApplicable
    );
    assert_eq!(check(&l, &input(None, &h)), Verdict::NotApplicable);
    assert_eq!(check(&l, &input(Some("deploy_x"), &h)), Verdict::Allowed);
}

#[test]
fn principal_keys_separate_callers() {
    let l = limit("  - {name: l, key: [principal], rate: 1/h, burst: 1}\n");
    let mut a = http::HeaderMap::new();
    a.insert("authorization", "Bearer alice".parse().unwrap());
    let mut b = http::HeaderMap::new();
    b.insert("authorization", "Bearer bob".parse().unwrap());
    assert_eq!(check(&l, &input(None, &a)), Verdict::Allowed);
    assert!(matches!(check(&l, &input(None, &a)), Verdict::Limited(_)));
    assert_eq!(check(&l, &input(None, &b)), Verdict::Allowed);
}

#[test]
fn a_flood_of_fresh_keys_stays_within_the_cap_and_never_limits_a_steady_caller() {
    let l = limit("  - {name: l, key: [name], rate: 1/h, burst: 2, max_keys: 1000}\n");
    let h = http::HeaderMap::new();
    // The steady caller arrives after the store is full, and calls within its burst.
    for i in 0..5_000 {
        check(&l, &input(Some(&format!("flood{i}")), &h));
    }
    let mut steady = Vec::new();
    for round in 0..20_000 {
        let n = format!("k{round}");
        // Every new key gets its own bucket (no shared overflow bucket).
        assert_eq!(check(&l, &input(Some(&n), &h)), Verdict::Allowed);
        if round % 10_000 == 0 {
            steady.push(check(&l, &input(Some("steady"), &h)));
        }
    }
    assert_eq!(
        steady,
        vec![Verdict::Allowed; 2],
        "the steady caller was limited"
    );
    assert!(
        l.live_keys() <= 1000 + local::SHARDS,
        "{} keys",
        l.live_keys()
    );
    // A key that stays in use keeps its bucket: it is limited by its own rate.
    let l = limit("  - {name: l, key: [name], rate: 1/h, burst: 1, max_keys: 1000}\n");
    assert_eq!(check(&l, &input(Some("hot"), &h)), Verdict::Allowed);
    for i in 0..50 {
        check(&l, &input(Some(&format!("other{i}")), &h));
        assert!(matches!(
            check(&l, &input(Some("hot"), &h)),
            Verdict::Limited(_)
        ));
    }
}

#[test]
fn global_keys_are_stable_hashes_without_the_token() {
    let l = limit("  - {name: l, key: [principal, name], rate: 1/h}\n");
    let mut h = http::HeaderMap::new();
    h.insert("authorization", "Bearer s3cret-token".parse().unwrap());
    let k = l.global_key("p:", &input(Some("a"), &h));
    assert!(
        k.starts_with("p:") && k.len() == 2 + 32 && !k.contains("s3cret"),
        "{k}"
    );
    assert_eq!(k, l.global_key("p:", &input(Some("a"), &h)));
    assert_ne!(k, l.global_key("p:", &input(Some("b"), &h)));
    assert_ne!(k, l.global_key("p:", &input(None, &h)));
}

#[test]
fn a_global_limit_without_a_store_follows_its_policy() {
    let yaml = |p: &str| {
        format!("redis: {{url: 'redis://127.0.0.1:1'}}\nrate_limits:\n  - {{name: l, rate: 1/h, burst: 1, scope: global, on_store_error: {p}}}\n")
    };
    let parse = |p: &str| {
        let c = Config::parse(
            &format!("pools:\n  d: {{instances: [127.0.0.1:1]}}\n{}", yaml(p)),
            "t",
        )
        .unwrap();
        Limit::new(&c.rate_limits[0])
    };
    let h = http::HeaderMap::new();
    let allow = parse("allow");
    assert_eq!(allow.scope(), Scope::Global);
    assert!((0..5).all(|_| check(&allow, &input(None, &h)) == Verdict::Allowed));
    let deny = parse("deny");
    assert_eq!(check(&deny, &input(None, &h)), Verdict::Limited(DENY_RETRY));
    let local = parse("local");
    assert_eq!(check(&local, &input(None, &h)), Verdict::Allowed);
    assert!(matches!(
        check(&local, &input(None, &h)),
        Verdict::Limited(_)
    ));
}

#[test]
fn the_local_fallback_divides_rate_and_burst_by_the_replicas() {
    let q = Quota::per_second(std::num::NonZeroU32::new(10).unwrap());
    let s = scaled(q, 3);
    assert_eq!(s.burst_size().get(), 4);
    assert_eq!(s.replenish_interval(), Duration::from_millis(300));
    assert_eq!(scaled(q, 1), q);
}

#[test]
fn peeking_spends_nothing_and_says_what_the_check_would() {
    let l = limit("  - {name: l, key: [name], rate: 1/m, burst: 2}\n");
    let h = http::HeaderMap::new();
    let a = input(Some("a"), &h);
    for _ in 0..10 {
        assert_eq!(l.peek(&a), Some(Verdict::Allowed));
    }
    assert_eq!(l.live_keys(), 0, "a peek adds no key");
    assert_eq!(check(&l, &a), Verdict::Allowed);
    assert_eq!(check(&l, &a), Verdict::Allowed);
    for _ in 0..3 {
        assert!(matches!(l.peek(&a), Some(Verdict::Limited(_))));
    }
    assert!(matches!(check(&l, &a), Verdict::Limited(_)));
    // Another key is untouched; a limit that does not match says so.
    assert_eq!(l.peek(&input(Some("b"), &h)), Some(Verdict::Allowed));
    let only = limit("  - {name: l, match: {name: x}, rate: 1/m}\n");
    assert_eq!(only.peek(&a), None);
}
