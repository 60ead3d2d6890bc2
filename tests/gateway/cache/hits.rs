//! The edge cache over real sockets: hits with the request's id and the
//! remaining ttlMs, private results per credential, what is never stored or served, rate limits
//! on hits, spoofs refused before the cache. Upstreams: the reference backend
//! (`mcp_edge::backend`) and the scripted upstream of `tests/support/scripted.rs`, which counts
//! what reaches it. Invalidation: `invalidation`; load, coalescing and the
//! byte bound: `load`; the `Mcp-Param-*` header check:
//! `param_headers`.

use crate::support::cache::*;
use crate::support::config;
use crate::support::http::rpc;
use crate::support::scripted::{cacheable, Script, Scripted};
use mcp_edge::gateway::RunningGateway;
use serde_json::json;
use std::time::Duration;

#[test]
fn tools_list_is_served_from_cache_with_the_request_id() {
    let pool = mcp_edge::backend::Pool::start(mcp_edge::backend::PoolOptions::local(2)).unwrap();
    let gw = gateway(pool.addrs(), "");
    let first = rpc(gw.mcp_addr, json!(1), "tools/list", json!({}), &[]);
    assert_eq!(first.status, 200, "{}", first.text());
    assert_eq!(cache_header(&first), "miss");
    // Another client (other clientInfo and progressToken, string id) within the TTL.
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "other", "version": "9"},
        "progressToken": "p-1"});
    let second = rpc(
        gw.mcp_addr,
        json!("second"),
        "tools/list",
        json!({"_meta": meta}),
        &[],
    );
    assert_eq!(second.status, 200);
    assert!(
        cache_header(&second).starts_with("hit; age="),
        "{:?}",
        second.headers
    );
    assert_eq!(second.json()["id"], "second");
    assert_eq!(first.json()["id"], 1);
    assert_eq!(without_id_and_ttl(&first), without_id_and_ttl(&second));
    let ttl = second.json()["result"]["ttlMs"].as_u64().unwrap();
    // Byte for byte the upstream's answer, but for the id and the remaining ttlMs.
    let t1 = first.json()["result"]["ttlMs"].as_u64().unwrap();
    let expected = first
        .text()
        .replacen(r#""id":1"#, r#""id":"second""#, 1)
        .replacen(&format!(r#""ttlMs":{t1}"#), &format!(r#""ttlMs":{ttl}"#), 1);
    assert_eq!(second.text(), expected);
    assert!(ttl <= first.json()["result"]["ttlMs"].as_u64().unwrap());
    // The same headers as the upstream's (content type, the instance that produced it).
    assert_eq!(second.header("content-type"), first.header("content-type"));
    assert_eq!(
        second.header("x-mcp-edge-upstream"),
        first.header("x-mcp-edge-upstream")
    );
    // Both answers name the same backend instance: only one of the two instances was asked.
    assert_eq!(
        crate::support::http::instance_of(&first.result()),
        crate::support::http::instance_of(&second.result())
    );
    let m = scrape(&gw);
    assert_eq!(
        sample(&m, "mcp_edge_upstream_requests_total", &[]),
        1.0,
        "{m}"
    );
    assert_eq!(
        sample(&m, "mcp_edge_cache_hits_total", &["tools/list"]),
        1.0
    );
}

#[test]
fn server_discover_is_served_from_cache_per_its_ttl() {
    let pool = mcp_edge::backend::Pool::start(mcp_edge::backend::PoolOptions::local(1)).unwrap();
    let gw = gateway(pool.addrs(), "");
    let a = rpc(gw.mcp_addr, json!(1), "server/discover", json!({}), &[]);
    let b = rpc(gw.mcp_addr, json!(2), "server/discover", json!({}), &[]);
    assert_eq!((a.status, b.status), (200, 200));
    assert_eq!(cache_header(&a), "miss");
    assert!(cache_header(&b).starts_with("hit"));
    assert_eq!(b.json()["id"], 2);
    assert_eq!(without_id_and_ttl(&a), without_id_and_ttl(&b));
}

#[test]
fn private_results_are_served_only_to_the_same_credential() {
    let up = resource_upstream();
    let gw = gateway(&[up.addr], "");
    let alice = [("Authorization", "Bearer alice")];
    let bob = [("Authorization", "Bearer bob")];
    assert_eq!(cache_header(&read(&gw, 1, "private://doc", &alice)), "miss");
    let again = read(&gw, 2, "private://doc", &alice);
    assert!(
        cache_header(&again).starts_with("hit"),
        "{:?}",
        again.headers
    );
    assert_eq!(cache_header(&read(&gw, 3, "private://doc", &bob)), "miss");
    assert!(cache_header(&read(&gw, 4, "private://doc", &bob)).starts_with("hit"));
    // No credential: a private result is neither stored nor served.
    assert_eq!(cache_header(&read(&gw, 5, "private://doc", &[])), "miss");
    assert_eq!(cache_header(&read(&gw, 6, "private://doc", &[])), "miss");
    assert_eq!(up.count_method("resources/read"), 4);
    // A public result is shared across credentials.
    read(&gw, 7, "public://doc", &alice);
    assert!(cache_header(&read(&gw, 8, "public://doc", &bob)).starts_with("hit"));
    assert_eq!(up.count_method("resources/read"), 5);
}

#[test]
fn zero_negative_or_missing_ttl_is_never_served_from_cache() {
    let up = resource_upstream();
    let gw = gateway(&[up.addr], "");
    for uri in ["ttl://zero", "ttl://negative", "ttl://missing"] {
        for id in 0..2 {
            let r = read(&gw, id, uri, &[]);
            assert_eq!(r.status, 200);
            assert_eq!(cache_header(&r), "miss", "{uri}");
        }
    }
    assert_eq!(up.count_method("resources/read"), 6);
    let m = scrape(&gw);
    assert_eq!(
        sample(&m, "mcp_edge_cache_not_stored_total", &["ttl-zero"]),
        6.0,
        "{m}"
    );
}

#[test]
fn input_required_is_never_stored_and_retry_legs_never_served() {
    let up = resource_upstream();
    let gw = gateway(&[up.addr], "");
    for id in 0..2 {
        let r = read(&gw, id, "mrtr://ask", &[]);
        assert_eq!(r.json()["result"]["resultType"], "input_required");
        assert_eq!(cache_header(&r), "miss");
    }
    assert_eq!(up.count_method("resources/read"), 2);
    // A cached uri, then a retry leg for it: forwarded, not answered from the cache.
    read(&gw, 3, "file:///a", &[]);
    assert!(cache_header(&read(&gw, 4, "file:///a", &[])).starts_with("hit"));
    for extra in [
        json!({"requestState": "opaque"}),
        json!({"inputResponses": {"a": {}}}),
    ] {
        let mut params = json!({"uri": "file:///a"});
        for (k, v) in extra.as_object().unwrap() {
            params[k] = v.clone();
        }
        let r = rpc(gw.mcp_addr, json!(5), "resources/read", params, &[]);
        assert_eq!(r.status, 200);
        assert!(r.header("x-mcp-edge-cache").is_none(), "{:?}", r.headers);
    }
    assert_eq!(up.count_method("resources/read"), 5);
}

#[test]
fn hits_are_rate_limited_like_misses_and_spoofs_never_reach_the_cache() {
    let up = resource_upstream();
    let gw = gateway(&[up.addr], "rate_limits:\n  - {name: reads, match: {method: resources/read}, key: [name], rate: 1/m, burst: 2}\n");
    assert_eq!(read(&gw, 1, "file:///a", &[]).status, 200);
    assert!(cache_header(&read(&gw, 2, "file:///a", &[])).starts_with("hit"));
    let limited = read(&gw, 3, "file:///a", &[]);
    assert_eq!(limited.status, 429);
    // A request whose headers claim a cached method but whose body is another: refused by the
    // check before the cache is asked.
    let body = json!({"jsonrpc": "2.0", "id": 4, "method": "prompts/list", "params": {"_meta": crate::support::http::meta(json!({}))}});
    let headers = crate::support::http::good_headers("resources/read", Some("file:///b"));
    let r = crate::support::post(
        gw.mcp_addr,
        &crate::support::http::hdrs(&headers),
        &body.to_string(),
    );
    assert_eq!(r.status, 400);
    assert!(r.header("x-mcp-edge-cache").is_none());
}

#[test]
fn a_route_with_the_cache_off_forwards_everything() {
    let up = resource_upstream();
    let cfg = config(
        &[("default", &[up.addr], "balance: round_robin")],
        "default_route: {pool: default, cache: {enabled: false}}\n",
    );
    let gw = RunningGateway::start(cfg).unwrap();
    for i in 0..3 {
        assert!(read(&gw, i, "file:///a", &[])
            .header("x-mcp-edge-cache")
            .is_none());
    }
    assert_eq!(up.count_method("resources/read"), 3);
}

#[test]
fn stale_if_error_answers_with_an_expired_entry_when_the_refetch_fails() {
    let up = Scripted::start(|_| {
        Script::Result(
            cacheable(json!({"contents": []}), json!(200), "public"),
            Duration::ZERO,
        )
    });
    let addr = up.addr;
    let gw_with = |stale: &str| {
        let cfg = config(
            &[("default", &[addr], "balance: round_robin")],
            &format!("default_route: {{pool: default, cache: {{stale_if_error: {stale}}}}}\n"),
        );
        RunningGateway::start(cfg).unwrap()
    };
    let (kept, plain) = (gw_with("30s"), gw_with("0s"));
    for gw in [&kept, &plain] {
        assert_eq!(cache_header(&read(gw, 1, "file:///a", &[])), "miss");
    }
    drop(up);
    std::thread::sleep(Duration::from_millis(300));
    let r = read(&kept, 2, "file:///a", &[]);
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(
        cache_header(&r).starts_with("stale; age="),
        "{:?}",
        r.headers
    );
    assert_eq!(r.json()["id"], 2);
    assert_eq!(r.json()["result"]["ttlMs"], 0);
    // Without stale_if_error the failure is the answer.
    let r = read(&plain, 3, "file:///a", &[]);
    assert_eq!(r.status, 502, "{}", r.text());
}

#[test]
fn stale_while_revalidate_answers_waiters_while_one_request_refetches() {
    let up = Scripted::start(|_| {
        Script::Result(
            cacheable(json!({"contents": []}), json!(200), "public"),
            Duration::from_millis(2000),
        )
    });
    let cfg = config(
        &[("default", &[up.addr], "balance: round_robin")],
        "default_route: {pool: default, cache: {stale_while_revalidate: 30s}}\n",
    );
    let gw = RunningGateway::start(cfg).unwrap();
    assert_eq!(cache_header(&read(&gw, 1, "file:///a", &[])), "miss");
    std::thread::sleep(Duration::from_millis(300));
    let addr = gw.mcp_addr;
    let leader = std::thread::spawn(move || {
        rpc(
            addr,
            json!(2),
            "resources/read",
            json!({"uri": "file:///a"}),
            &[],
        )
    });
    // Once the leader's refetch is at the upstream, another request gets the expired entry.
    assert!(crate::support::eventually(Duration::from_secs(5), || up
        .count_method("resources/read")
        == 2));
    // "stale" (not "hit"): it did not wait for the leader's refetch.
    let r = read(&gw, 3, "file:///a", &[]);
    assert!(
        cache_header(&r).starts_with("stale; age="),
        "{:?}",
        r.headers
    );
    assert!(!leader.is_finished());
    assert_eq!(r.json()["result"]["ttlMs"], 0);
    assert_eq!(cache_header(&leader.join().unwrap()), "miss");
    assert!(cache_header(&read(&gw, 4, "file:///a", &[])).starts_with("hit"));
    assert_eq!(up.count_method("resources/read"), 2);
}

#[test]
fn a_response_over_max_entry_bytes_passes_through_unstored() {
    let big = "b".repeat(6000);
    let up = Scripted::start(move |_| {
        Script::Result(
            cacheable(json!({"contents": [{"text": big}]}), json!(60000), "public"),
            Duration::ZERO,
        )
    });
    let cfg = config(
        &[("default", &[up.addr], "balance: round_robin")],
        "default_route: {pool: default, cache: {max_entry_bytes: 4096}}\n",
    );
    let gw = RunningGateway::start(cfg).unwrap();
    for id in 0..2 {
        let r = read(&gw, id, "file:///big", &[]);
        assert_eq!(
            r.json()["result"]["contents"][0]["text"]
                .as_str()
                .unwrap()
                .len(),
            6000
        );
        assert!(r.header("x-mcp-edge-cache").is_none(), "{:?}", r.headers);
    }
    assert_eq!(up.count_method("resources/read"), 2);
    let m = scrape(&gw);
    assert_eq!(
        sample(&m, "mcp_edge_cache_not_stored_total", &["too-large"]),
        2.0,
        "{m}"
    );
}
