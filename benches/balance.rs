//! The balancer's choice on the request path: one pick (and, for the load-aware modes, the
//! request's begin and end on its instance, as the gateway does them) for a pool of 3 and of 20
//! instances, per mode: round robin, least loaded, hash on the tool name, hash with a load
//! bound, and round robin with slow start in effect.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use std::fmt::Write as _;
use std::hint::black_box;
use std::time::Duration;

use mcp_edge::config::Config;
use mcp_edge::gateway::balance::stages::{load, Pool, Tried};

fn pool(n: usize, body: &str) -> Pool {
    let mut y = String::from("pools:\n  p:\n    instances: [");
    for i in 0..n {
        write!(y, "{}127.0.0.1:{}", if i > 0 { ", " } else { "" }, 7001 + i).unwrap();
    }
    writeln!(y, "]\n{body}default_route: {{pool: p}}").unwrap();
    let cfg = Config::parse(&y, "bench").expect("valid config");
    let mut p = Pool::build("p", &cfg.pools["p"], None).expect("pool");
    // A reload that adds nothing: with slow start, every instance ramps (the costly path).
    let previous = Pool::build("p", &cfg.pools["p"], None).expect("pool");
    if body.contains("slow_start") {
        p.adopt_loads(Some(&previous));
        (0..n).for_each(|i| p.loads[i].ramp_from(load::now_ns()));
    }
    let now = load::now_ns();
    for (i, l) in p.loads.iter().enumerate() {
        l.observe(Duration::from_micros(500 + 100 * i as u64), now, p.decay);
    }
    p
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("balance");
    let modes = [
        ("round_robin", "    balance: round_robin\n"),
        ("least_loaded", "    balance: least_loaded\n"),
        ("hash", "    balance: hash\n"),
        ("hash_bounded", "    balance: hash\n    load_bound: 0.25\n"),
        (
            "slow_start",
            "    balance: round_robin\n    slow_start: 1h\n",
        ),
    ];
    let headers = http::HeaderMap::new();
    for (mode, body) in modes {
        for n in [3, 20] {
            let p = pool(n, body);
            g.bench_with_input(BenchmarkId::new(mode, n), &p, |b, p| {
                b.iter(|| {
                    let picked = p.pick_request(
                        black_box(Some("tools/call")),
                        black_box(Some("search_docs")),
                        &headers,
                        None,
                        Tried::default(),
                    );
                    let i = picked.index.unwrap();
                    p.loads[i].begin();
                    p.loads[i].observe(Duration::from_micros(700), load::now_ns(), p.decay);
                    p.loads[i].end();
                    black_box(i)
                })
            });
        }
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
