//! Load-aware balancing through a running gateway, against recording upstreams one of which is
//! made slow: `least_loaded` sends the slow instance less (with default settings, only its
//! probes) and returns to it within seconds once it is fast again; a bounded hash pool moves a hot key's overflow off its home and brings it back when
//! the home drains; slow start ramps an instance added by a reload.

use mcp_edge::config::Config;
use mcp_edge::gateway::RunningGateway;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use crate::support::*;

/// A gateway config on the given listeners with one pool `default` (its YAML body after
/// `instances`) as the default route; health checks off so only balancing decides.
fn gateway_yaml(mcp: SocketAddr, admin: SocketAddr, addrs: &[SocketAddr], pool: &str) -> Config {
    let list: Vec<String> = addrs.iter().map(|a| a.to_string()).collect();
    let y = format!(
        "work_stealing: true\nlisten:\n  mcp: {mcp}\n  admin: {admin}\npools:\n  default:\n    instances: [{}]\n    health: {{check: off}}\n{pool}default_route: {{pool: default}}\n",
        list.join(", ")
    );
    Config::parse(&y, "test.yaml").unwrap_or_else(|e| panic!("{e}\n{y}"))
}

fn loopback_pair() -> (SocketAddr, SocketAddr) {
    let at = |p| SocketAddr::from(([127, 0, 0, 1], p));
    (at(free_port()), at(free_port()))
}

/// `threads` clients each sending `each` tools/call of `name` in a row; the index of the
/// instance that served each request.
fn load(
    gw: &RunningGateway,
    up: &Upstreams,
    threads: usize,
    each: usize,
    name: &str,
) -> Vec<usize> {
    let addr = gw.mcp_addr;
    let names = up.instance_names();
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let (name, names) = (name.to_string(), names.clone());
            std::thread::spawn(move || {
                (0..each)
                    .map(|k| {
                        let id = (t * 10_000 + k) as u64;
                        let r = post(addr, &refs(&call_headers(&name)), &call(id, &name));
                        assert_eq!(r.status, 200, "{}", r.text());
                        let by = r.header("x-mcp-edge-upstream").unwrap().to_string();
                        names.iter().position(|n| *n == by).unwrap()
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect()
}

fn share(picks: &[usize], i: usize) -> f64 {
    picks.iter().filter(|&&p| p == i).count() as f64 / picks.len() as f64
}

#[test]
fn least_loaded_avoids_a_slow_instance_and_returns_when_it_is_fast_again() {
    let up = Upstreams::start(3);
    up.set_delay(2, Duration::from_millis(80));
    let (mcp, admin) = loopback_pair();
    let pool = "    balance: least_loaded\n    latency_decay: 1s\n";
    let gw = RunningGateway::start(gateway_yaml(mcp, admin, &up.addrs, pool)).unwrap();
    let picks = load(&gw, &up, 4, 40, "echo");
    let slow = share(&picks, 2);
    assert!(
        slow < 0.12,
        "the slow instance took {slow:.2} of the requests"
    );
    let m = scrape(&gw);
    let ewma = |i: usize| {
        let labels = format!("upstream=\"{}\"", up.addrs[i]);
        sample(&m, "mcp_edge_upstream_latency_ewma_seconds", &[&labels])
    };
    // Every answer of instance 2 took the injected 80 ms more than the others' would: its
    // average is above theirs by at least half of that (a ratio would depend on how loaded the
    // machine running the test is: the fast instance's own latency grows with it).
    assert!(ewma(2) > ewma(0) + 0.04, "{} vs {}", ewma(2), ewma(0));
    // Fast again: its probes (one per probe_interval) see it fast, and it takes its share.
    up.set_delay(2, Duration::ZERO);
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut back = 0.0;
    while Instant::now() < deadline && back < 0.2 {
        back = share(&load(&gw, &up, 3, 20, "echo"), 2);
    }
    assert!(back >= 0.2, "the recovered instance only took {back:.2}");
}

#[test]
fn bounded_hashing_moves_a_hot_keys_overflow_and_brings_it_home_when_it_drains() {
    let up = Upstreams::start(3);
    for i in 0..3 {
        up.set_delay(i, Duration::from_millis(150));
    }
    let (mcp, admin) = loopback_pair();
    let pool = "    balance: hash\n    load_bound: 0.25\n";
    let gw = RunningGateway::start(gateway_yaml(mcp, admin, &up.addrs, pool)).unwrap();
    let home = load(&gw, &up, 1, 1, "hot")[0];
    // Nine at once: the home may hold floor(1.25 × (n + 1) / 3) of them, the rest move on.
    let picks = load(&gw, &up, 9, 1, "hot");
    let at_home = picks.iter().filter(|&&p| p == home).count();
    assert!((1..9).contains(&at_home), "{picks:?} (home {home})");
    let moved = sample(&scrape(&gw), "mcp_edge_balance_hash_moved_total", &[]);
    assert_eq!(moved, (9 - at_home) as f64);
    // Drained: one at a time, the key is home again, every time.
    let picks = load(&gw, &up, 1, 5, "hot");
    assert!(picks.iter().all(|&p| p == home), "{picks:?} (home {home})");
    // Without the bound, all nine stay home.
    let unbounded = Upstreams::start(3);
    for i in 0..3 {
        unbounded.set_delay(i, Duration::from_millis(150));
    }
    let (mcp, admin) = loopback_pair();
    let cfg = gateway_yaml(mcp, admin, &unbounded.addrs, "    balance: hash\n");
    let gw = RunningGateway::start(cfg).unwrap();
    let picks = load(&gw, &unbounded, 9, 1, "hot");
    assert!(picks.windows(2).all(|w| w[0] == w[1]), "{picks:?}");
}

#[test]
fn slow_start_ramps_an_instance_a_reload_adds() {
    let up = Upstreams::start(3);
    let (mcp, admin) = loopback_pair();
    let pool = "    balance: round_robin\n    slow_start: 4s\n";
    let gw = RunningGateway::start(gateway_yaml(mcp, admin, &up.addrs[..2], pool)).unwrap();
    assert!(load(&gw, &up, 1, 6, "echo").iter().all(|&p| p < 2));
    gw.reload(gateway_yaml(mcp, admin, &up.addrs, pool))
        .unwrap();
    let started = Instant::now();
    let early = share(&load(&gw, &up, 2, 60, "echo"), 2);
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "the early sample ran late"
    );
    assert!(early < 0.2, "the new instance took {early:.2} at once");
    let labels = format!("upstream=\"{}\"", up.addrs[2]);
    let w = sample(
        &scrape(&gw),
        "mcp_edge_upstream_effective_weight",
        &[&labels],
    );
    assert!(w < 1.0, "effective weight {w} while ramping");
    let full = |_: &()| share(&load(&gw, &up, 2, 30, "echo"), 2) > 0.28;
    assert!(
        eventually(Duration::from_secs(10), || full(&())),
        "the new instance never reached its share"
    );
}

#[test]
fn least_loaded_keeps_a_slow_instance_to_its_probes_and_takes_it_back_fast() {
    let up = Upstreams::start(3);
    up.set_delay(2, Duration::from_millis(40));
    let (mcp, admin) = loopback_pair();
    // Defaults: latency_decay 10s, probe_interval 2s, probe_share 0.01.
    let pool = "    balance: least_loaded\n";
    let gw = RunningGateway::start(gateway_yaml(mcp, admin, &up.addrs, pool)).unwrap();
    let picks = load(&gw, &up, 4, 150, "echo");
    let slow = picks.iter().filter(|&&p| p == 2).count();
    // Its first answers (before it has a latency of its own, all instances look alike) and
    // at most one probe per 2 s: a handful of the 600 calls.
    assert!(slow <= 12, "the slow instance took {slow} of 600 calls");
    // Fast again: the next probes see it fast (two in a row bring its estimate down) and it
    // takes about its third of the calls again.
    up.set_delay(2, Duration::ZERO);
    let since = Instant::now();
    let mut back = 0.0;
    while since.elapsed() < Duration::from_secs(15) && back < 0.2 {
        back = share(&load(&gw, &up, 3, 20, "echo"), 2);
    }
    assert!(back >= 0.2, "the recovered instance only took {back:.2}");
    let m = scrape(&gw);
    let labels = format!("upstream=\"{}\"", up.addrs[2]);
    let probes = sample(&m, "mcp_edge_balance_probes_total", &[&labels]);
    // It was measured again by probes (a second fast answer may also come from a draw it won
    // when the machine stalled the fast instances).
    assert!(probes >= 1.0, "{probes} probes");
    eprintln!(
        "slow instance: {slow} of 600 calls; back to {back:.2} after {:?} ({probes} probes)",
        since.elapsed()
    );
}
