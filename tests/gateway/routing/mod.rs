//! Routing and balancing over real sockets: routes pick pools by method and (decoded) name,
//! consistent hashing keeps a key on one instance, round robin spreads, connect failures move on
//! to another instance, and the instance header can be renamed or turned off; load-aware
//! balancing ([`balance`]): least-loaded, bounded hashing, slow start; latency outliers
//! ([`outliers`]).

mod balance;
mod outliers;

use crate::support::*;
use mcp_edge::gateway::RunningGateway;
use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;

fn served_by(r: &Reply) -> String {
    r.header("x-mcp-edge-upstream")
        .expect("proxied responses name their instance")
        .to_string()
}

#[test]
fn routes_send_methods_and_names_to_their_pools() {
    let tools = Upstreams::start(1);
    let deploys = Upstreams::start(1);
    let meteo = Upstreams::start(1);
    let rest = Upstreams::start(1);
    let cfg = config(
        &[
            ("tools", &tools.addrs, "balance: round_robin"),
            ("deploys", &deploys.addrs, "balance: round_robin"),
            ("meteo", &meteo.addrs, "balance: round_robin"),
            ("rest", &rest.addrs, "balance: round_robin"),
        ],
        "routes:\n\
         \x20 - {name: deploys, match: {method: tools/call, name: deploy_*}, pool: deploys}\n\
         \x20 - {name: weather, match: {name: météo}, pool: meteo}\n\
         \x20 - {name: tools, match: {method: tools/*}, pool: tools}\n\
         default_route: {pool: rest}\n",
    );
    let gw = RunningGateway::start(cfg).unwrap();
    let send = |name: &str| post(gw.mcp_addr, &refs(&call_headers(name)), &call(1, name));
    assert_eq!(
        served_by(&send("deploy_billing")),
        deploys.addrs[0].to_string()
    );
    assert_eq!(served_by(&send("lookup")), tools.addrs[0].to_string());
    // Routing uses the decoded base64 name.
    let r = send("météo");
    assert_eq!(r.status, 200);
    assert_eq!(served_by(&r), meteo.addrs[0].to_string());
    let mut h = plain_headers("tools/list");
    h.push(("Mcp-Name", "deploy_x"));
    let r = post(gw.mcp_addr, &h, &plain(2, "tools/list"));
    assert_eq!(
        served_by(&r),
        tools.addrs[0].to_string(),
        "Mcp-Name on tools/list is not routed on"
    );
    let discover = plain(3, "server/discover");
    let r = post(gw.mcp_addr, &plain_headers("server/discover"), &discover);
    assert_eq!(served_by(&r), rest.addrs[0].to_string());
    assert_eq!(
        (tools.count(), deploys.count(), meteo.count(), rest.count()),
        (2, 1, 1, 1)
    );
}

#[test]
fn without_a_default_route_unmatched_requests_get_404() {
    let up = Upstreams::start(1);
    let cfg = config(
        &[("tools", &up.addrs, "balance: round_robin")],
        "routes:\n  - {match: {method: tools/call}, pool: tools}\n",
    );
    let gw = RunningGateway::start(cfg).unwrap();
    let discover = plain(3, "server/discover");
    let r = post(gw.mcp_addr, &plain_headers("server/discover"), &discover);
    assert_eq!((r.status, r.error_code()), (404, -32601));
    assert_eq!(up.count(), 0);
}

#[test]
fn round_robin_spreads_evenly_over_instances() {
    let up = Upstreams::start(3);
    let gw = simple_gateway(&up, "");
    let mut counts: HashMap<String, usize> = HashMap::new();
    for i in 0..30 {
        *counts
            .entry(served_by(&post(
                gw.mcp_addr,
                &refs(&call_headers("t")),
                &call(i, "t"),
            )))
            .or_default() += 1;
    }
    assert_eq!(counts.len(), 3);
    assert!(counts.values().all(|n| *n == 10), "{counts:?}");
}

fn hash_gateway(addrs: &[SocketAddr], key: &str) -> RunningGateway {
    let cfg = config(
        &[("p", addrs, &format!("balance: hash\n    hash_key: {key}"))],
        "default_route: {pool: p}\n",
    );
    RunningGateway::start(cfg).unwrap()
}

#[test]
fn hashing_on_the_name_is_stable_spreads_and_moves_about_one_nth_when_an_instance_goes() {
    let up = Upstreams::start(4);
    let four = hash_gateway(&up.addrs, "mcp-name");
    let three = hash_gateway(&up.addrs[..3], "mcp-name");
    let names: Vec<String> = (0..200).map(|i| format!("tool_{i}")).collect();
    let on = |gw: &RunningGateway, n: &str| {
        served_by(&post(gw.mcp_addr, &refs(&call_headers(n)), &call(1, n)))
    };
    let mut moved = 0;
    let mut used = HashSet::new();
    for n in &names {
        let a = on(&four, n);
        assert_eq!(a, on(&four, n), "{n} must stay on one instance");
        used.insert(a.clone());
        let b = on(&three, n);
        if a != b {
            moved += 1;
            assert_eq!(
                a,
                up.addrs[3].to_string(),
                "{n} moved although its instance stayed"
            );
        }
    }
    assert_eq!(used.len(), 4, "keys spread over every instance");
    assert!(
        (20..=90).contains(&moved),
        "{moved} of 200 keys moved; expected about 50"
    );
}

#[test]
fn hashing_on_the_principal_or_a_header() {
    let up = Upstreams::start(4);
    let gw = hash_gateway(&up.addrs, "principal");
    let mut by_user: HashMap<String, HashSet<String>> = HashMap::new();
    for user in ["alice", "bob", "carol", "dave", "erin", "frank"] {
        for tool in ["a", "b", "c"] {
            let mut h = call_headers(tool);
            h.push(("Authorization", format!("Bearer {user}")));
            by_user
                .entry(user.into())
                .or_default()
                .insert(served_by(&post(gw.mcp_addr, &refs(&h), &call(1, tool))));
        }
    }
    assert!(
        by_user.values().all(|s| s.len() == 1),
        "one instance per principal: {by_user:?}"
    );
    let gw = hash_gateway(&up.addrs, "header:x-tenant");
    let mut seen = HashSet::new();
    for _ in 0..5 {
        let mut h = call_headers("t");
        h.push(("X-Tenant", "acme".into()));
        seen.insert(served_by(&post(gw.mcp_addr, &refs(&h), &call(1, "t"))));
    }
    assert_eq!(seen.len(), 1);
}

#[test]
fn a_refused_connection_is_tried_on_another_instance() {
    let modes = [
        "balance: round_robin",
        "balance: least_loaded",
        "balance: hash",
        "{balance: hash, load_bound: 0.25}",
    ];
    for balance in modes {
        let up = Upstreams::start(1);
        let dead = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let pool = balance.trim_start_matches('{').trim_end_matches('}');
        let pool = pool.replace(", ", "\n    ");
        let cfg = config(
            &[("p", &[dead, up.addrs[0]], &pool)],
            "default_route: {pool: p}\n",
        );
        let gw = RunningGateway::start(cfg).unwrap();
        for i in 0..6 {
            let name = format!("t{i}");
            let r = post(gw.mcp_addr, &refs(&call_headers(&name)), &call(i, &name));
            assert_eq!(r.status, 200, "{balance} request {i}: {}", r.text());
            assert_eq!(served_by(&r), up.addrs[0].to_string(), "{balance}");
        }
        assert_eq!(up.count(), 6, "{balance}");
    }
}

#[test]
fn the_instance_header_can_be_renamed_or_turned_off() {
    let up = Upstreams::start(1);
    let gw = simple_gateway(&up, "upstream_header: x-served-by\n");
    let r = post(gw.mcp_addr, &refs(&call_headers("t")), &call(1, "t"));
    assert_eq!(
        r.header("x-served-by"),
        Some(up.addrs[0].to_string().as_str())
    );
    assert!(r.header("x-mcp-edge-upstream").is_none());
    drop(gw);
    let gw = simple_gateway(&up, "upstream_header: false\n");
    let r = post(gw.mcp_addr, &refs(&call_headers("t")), &call(1, "t"));
    assert_eq!(r.status, 200);
    assert!(r.header("x-mcp-edge-upstream").is_none());
}

#[test]
fn admin_endpoints_answer() {
    let up = Upstreams::start(1);
    let gw = simple_gateway(&up, "");
    let admin = gw.admin_addr.unwrap();
    let get = |p: &str| {
        raw(
            admin,
            format!("GET {p} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes(),
        )
    };
    assert_eq!(get("/healthz").status, 200);
    assert_eq!(get("/readyz").status, 200);
    let m = get("/metrics");
    assert_eq!(m.status, 200);
    assert!(String::from_utf8_lossy(&m.body).contains("mcp_edge_build_info"));
    assert_eq!(get("/nope").status, 404);
}

#[test]
fn readyz_turns_not_ready_when_every_instance_of_a_pool_is_down() {
    let up = Upstreams::start(1);
    let dead = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let checks = "balance: round_robin\n    health: {interval: 100ms, timeout: 100ms, unhealthy_threshold: 1}";
    let cfg = config(
        &[("live", &up.addrs, checks), ("gone", &[dead], checks)],
        "default_route: {pool: live}\n",
    );
    let gw = RunningGateway::start(cfg).unwrap();
    let admin = gw.admin_addr.unwrap();
    let readyz = || raw(admin, b"GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n");
    assert!(
        eventually(std::time::Duration::from_secs(3), || readyz().status == 503),
        "still ready"
    );
    let r = readyz();
    assert!(
        String::from_utf8_lossy(&r.body).contains("gone"),
        "{:?}",
        String::from_utf8_lossy(&r.body)
    );
    let m =
        String::from_utf8(raw(admin, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").body).unwrap();
    assert!(
        m.lines().any(|l| l.starts_with("mcp_edge_upstream_up{")
            && l.contains(&dead.to_string())
            && l.ends_with(" 0")),
        "{m}"
    );
}
