//! One rate-limit check as the gateway makes it per request: match, key hash (route + name, or
//! the bearer token), and the GCRA decision in the bounded keyed store. The quota is large enough
//! that every check is allowed (the steady state of a healthy gateway).

use criterion::{criterion_group, criterion_main, Criterion};
use futures::executor::block_on;
use std::hint::black_box;

use mcp_edge::config::Config;
use mcp_edge::gateway::rate_limits::stages::{Limit, LimitInput, Verdict};

fn limit(key: &str) -> Limit {
    let yaml = format!(
        "pools:\n  d: {{instances: [127.0.0.1:1]}}\nrate_limits:\n  - {{name: l, key: [{key}], rate: 1000000000/s}}\n"
    );
    Limit::new(
        &Config::parse(&yaml, "bench")
            .expect("valid config")
            .rate_limits[0],
    )
}

fn bench(c: &mut Criterion) {
    let mut h = http::HeaderMap::new();
    h.insert(
        "authorization",
        "Bearer alice-token-0123456789".parse().unwrap(),
    );
    let input = LimitInput {
        route: "tool-calls",
        method: Some("tools/call"),
        name: Some("echo"),
        headers: &h,
        client_ip: Some("127.0.0.1".parse().unwrap()),
        identity: None,
    };
    for key in ["route, name", "principal"] {
        let l = limit(key);
        assert_eq!(block_on(l.check(&input)), Verdict::Allowed);
        c.bench_function(&format!("limit/check [{key}]"), |b| {
            b.iter(|| black_box(block_on(l.check(black_box(&input)))))
        });
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
