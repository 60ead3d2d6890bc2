//! Route matching on the claimed Mcp-Method / Mcp-Name, with 10, 1,000 and 10,000 routes: the
//! first route, the last route, and a miss that falls through to the default route. Two tables:
//! `exact` (every route an exact method and name: found by the index, constant time) and `mixed`
//! (every tenth name a glob, tried in file order before the exact candidate).

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use std::fmt::Write as _;
use std::hint::black_box;

use mcp_edge::config::Config;
use mcp_edge::gateway::stages::route::RouteTable;

/// `n` routes on exact tool names; with `globs`, every tenth is a glob.
fn table(n: usize, globs: bool) -> RouteTable {
    let mut y = String::from("pools:\n  a: {instances: [127.0.0.1:1]}\nroutes:\n");
    for i in 0..n {
        let name = if globs && i % 10 == 9 {
            format!("tool_{i}_*")
        } else {
            format!("tool_{i}")
        };
        writeln!(
            y,
            "  - {{match: {{method: tools/call, name: '{name}'}}, pool: a}}"
        )
        .unwrap();
    }
    y.push_str("default_route: {pool: a}\n");
    RouteTable::from_config(&Config::parse(&y, "bench").expect("valid config"))
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("route");
    for (shape, globs) in [("exact", false), ("mixed", true)] {
        for n in [10, 1000, 10_000] {
            let t = table(n, globs);
            let last = format!("tool_{}", n - 2);
            for (case, name) in [
                ("first", "tool_0"),
                ("last", last.as_str()),
                ("miss", "nope"),
            ] {
                let id = BenchmarkId::new(format!("{shape}/{case}"), n);
                g.bench_with_input(id, &name, |b, name| {
                    b.iter(|| {
                        black_box(t.select(black_box(Some("tools/call")), black_box(Some(name))))
                    })
                });
            }
        }
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
