//! The edge cache over real sockets (G28–G32, G34, G39): hits with the request's id and the
//! remaining ttlMs, private results per credential, what is never stored or served,
//! invalidation by notifications on proxied streams, purge, coalescing, the byte bound, and
//! x-mcp-header enforcement learned from tools/list. Upstreams: the reference backend
//! (`mcp_edge::backend`) and the scripted upstream of `tests/support/scripted.rs`, which counts
//! what reaches it.

mod common;
mod support;

use common::{request, rpc, SseStream};
use mcp_edge::gateway::RunningGateway;
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::time::Duration;
use support::scripted::{cacheable, Script, Scripted};
use support::{config, eventually, Reply};

const NOW: Duration = Duration::ZERO;

fn gateway(addrs: &[SocketAddr], extra: &str) -> RunningGateway {
    let cfg = config(
        &[("default", addrs, "balance: round_robin")],
        &format!("default_route: {{pool: default}}\n{extra}"),
    );
    RunningGateway::start(cfg).unwrap()
}

fn scrape(gw: &RunningGateway) -> String {
    let r = request(gw.admin_addr.unwrap(), "GET", "/metrics", &[], b"");
    String::from_utf8(r.body).unwrap()
}

fn sample(text: &str, name: &str, parts: &[&str]) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| l.split(['{', ' ']).next() == Some(name))
        .filter(|l| parts.iter().all(|p| l.contains(p)))
        .map(|l| l.rsplit(' ').next().unwrap().parse::<f64>().unwrap())
        .sum()
}

/// The body with `"id"` and `"ttlMs"` values blanked, to compare a hit with the original.
fn without_id_and_ttl(r: &Reply) -> Value {
    let mut v = r.json();
    v["id"] = Value::Null;
    if v["result"].get("ttlMs").is_some() {
        v["result"]["ttlMs"] = Value::Null;
    }
    v
}

fn cache_header(r: &Reply) -> &str {
    r.header("x-mcp-edge-cache").unwrap_or("")
}

fn resource_upstream() -> Scripted {
    Scripted::start(|req| {
        let uri = req["params"]["uri"].as_str().unwrap_or("").to_string();
        let contents = json!({"contents": [{"uri": uri, "text": format!("body of {uri}")}]});
        match req["method"].as_str().unwrap_or("") {
            "resources/read" => match uri.as_str() {
                u if u.starts_with("private://") => {
                    Script::Result(cacheable(contents, json!(60000), "private"), NOW)
                }
                "ttl://zero" => Script::Result(cacheable(contents, json!(0), "public"), NOW),
                "ttl://negative" => Script::Result(cacheable(contents, json!(-5), "public"), NOW),
                "ttl://missing" => Script::Result(
                    json!({"resultType": "complete", "cacheScope": "public", "contents": []}),
                    NOW,
                ),
                "mrtr://ask" => Script::Result(
                    json!({"resultType": "input_required", "ttlMs": 60000, "cacheScope": "public",
                           "inputRequests": {"a": {"method": "elicitation/create", "params": {}}}}),
                    NOW,
                ),
                _ => Script::Result(cacheable(contents, json!(60000), "public"), NOW),
            },
            "subscriptions/listen" => Script::Listen,
            "tools/list" => {
                let page = req["params"]["cursor"]
                    .as_str()
                    .unwrap_or("first")
                    .to_string();
                if page == "stale" {
                    return Script::Error(-32602);
                }
                let next = if page == "first" {
                    json!("second")
                } else {
                    Value::Null
                };
                let mut r = cacheable(
                    json!({"tools": [{"name": format!("tool-{page}"), "inputSchema": {"type": "object"}}]}),
                    json!(60000),
                    "public",
                );
                if !next.is_null() {
                    r["nextCursor"] = next;
                }
                Script::Result(r, NOW)
            }
            _ => Script::Result(cacheable(json!({}), json!(60000), "public"), NOW),
        }
    })
}

fn read(gw: &RunningGateway, id: i64, uri: &str, extra: &[(&str, &str)]) -> Reply {
    rpc(
        gw.mcp_addr,
        json!(id),
        "resources/read",
        json!({"uri": uri}),
        extra,
    )
}

#[test]
fn g28_tools_list_is_served_from_cache_with_the_request_id() {
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
    assert!(ttl <= first.json()["result"]["ttlMs"].as_u64().unwrap());
    // The same headers as the upstream's (content type, the instance that produced it).
    assert_eq!(second.header("content-type"), first.header("content-type"));
    assert_eq!(
        second.header("x-mcp-edge-upstream"),
        first.header("x-mcp-edge-upstream")
    );
    // Both answers name the same backend instance: only one of the two instances was asked.
    assert_eq!(
        common::instance_of(&first.result()),
        common::instance_of(&second.result())
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
fn g39_server_discover_is_served_from_cache_per_its_ttl() {
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
fn g29_private_results_are_served_only_to_the_same_credential() {
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
fn g30_zero_negative_or_missing_ttl_is_never_served_from_cache() {
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
fn g31_input_required_is_never_stored_and_retry_legs_never_served() {
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
fn g32_list_changed_on_a_listen_stream_invalidates_the_pools_tools_list() {
    let pool = mcp_edge::backend::Pool::start(mcp_edge::backend::PoolOptions::local(1)).unwrap();
    let gw = gateway(pool.addrs(), "");
    rpc(gw.mcp_addr, json!(1), "tools/list", json!({}), &[]);
    assert!(
        cache_header(&rpc(gw.mcp_addr, json!(2), "tools/list", json!({}), &[])).starts_with("hit")
    );
    // A listen stream through the gateway.
    let params =
        json!({"notifications": {"toolsListChanged": true}, "_meta": common::meta(json!({}))});
    let body = json!({"jsonrpc": "2.0", "id": "listen-1", "method": "subscriptions/listen", "params": params});
    let headers = common::good_headers("subscriptions/listen", None);
    let mut stream = SseStream::open(gw.mcp_addr, &common::hdrs(&headers), &body.to_string());
    assert_eq!(stream.status, 200);
    let ack = stream.next_message().unwrap();
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged");
    let t = common::call(
        gw.mcp_addr,
        3,
        "test_trigger_tool_change",
        json!({}),
        json!({}),
        None,
        json!({}),
    );
    assert_eq!(t.status, 200, "{}", t.text());
    let n = stream.next_message().unwrap();
    assert_eq!(n["method"], "notifications/tools/list_changed");
    // The gateway saw it pass: the next tools/list goes to the upstream again.
    let mut last = String::new();
    let invalidated = eventually(Duration::from_secs(5), || {
        last = cache_header(&rpc(gw.mcp_addr, json!(4), "tools/list", json!({}), &[])).to_string();
        last == "miss"
    });
    assert!(invalidated, "still {last}");
}

#[test]
fn g32_resources_updated_drops_that_uri_and_an_invalid_cursor_drops_the_pages() {
    let up = resource_upstream();
    let gw = gateway(&[up.addr], "");
    read(&gw, 1, "file:///a", &[]);
    read(&gw, 2, "file:///b", &[]);
    let body = json!({"jsonrpc": "2.0", "id": 9, "method": "subscriptions/listen", "params": {"_meta": common::meta(json!({}))}});
    let headers = common::good_headers("subscriptions/listen", None);
    let mut stream = SseStream::open(gw.mcp_addr, &common::hdrs(&headers), &body.to_string());
    stream.next_message().unwrap();
    up.notify(json!({"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": "file:///a"}}));
    assert_eq!(stream.next_message().unwrap()["params"]["uri"], "file:///a");
    assert!(eventually(Duration::from_secs(5), || cache_header(&read(
        &gw,
        3,
        "file:///a",
        &[]
    )) == "miss"));
    assert!(cache_header(&read(&gw, 4, "file:///b", &[])).starts_with("hit"));
    // Pages are cached separately; an invalid cursor drops them all.
    let page = |id: i64, cursor: Option<&str>| {
        let params = cursor.map_or(json!({}), |c| json!({"cursor": c}));
        rpc(gw.mcp_addr, json!(id), "tools/list", params, &[])
    };
    let p1 = page(10, None);
    assert_eq!(p1.json()["result"]["nextCursor"], "second");
    page(11, Some("second"));
    assert!(cache_header(&page(12, None)).starts_with("hit"));
    assert!(cache_header(&page(13, Some("second"))).starts_with("hit"));
    assert_eq!(up.count_method("tools/list"), 2);
    assert_eq!(page(14, Some("stale")).json()["error"]["code"], -32602);
    assert_eq!(cache_header(&page(15, None)), "miss");
    assert_eq!(cache_header(&page(16, Some("second"))), "miss");
}

#[test]
fn purge_on_the_admin_listener_drops_entries() {
    let up = resource_upstream();
    let gw = gateway(&[up.addr], "");
    read(&gw, 1, "file:///a b", &[]);
    read(&gw, 2, "file:///c", &[]);
    let admin = gw.admin_addr.unwrap();
    let r = request(
        admin,
        "POST",
        "/-/cache/purge?method=resources/read&name=file%3A%2F%2F%2Fa%20b",
        &[],
        b"",
    );
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(cache_header(&read(&gw, 3, "file:///a b", &[])), "miss");
    assert!(cache_header(&read(&gw, 4, "file:///c", &[])).starts_with("hit"));
    let bad = request(admin, "POST", "/-/cache/purge?method=tools/call", &[], b"");
    assert_eq!(bad.status, 400);
    assert!(bad.text().contains("never cached"), "{}", bad.text());
    assert_eq!(
        request(admin, "POST", "/-/cache/purge", &[], b"").status,
        200
    );
    assert_eq!(cache_header(&read(&gw, 5, "file:///c", &[])), "miss");
}

#[test]
fn two_hundred_concurrent_misses_make_one_upstream_request() {
    let up = Scripted::start(|_| {
        Script::Result(
            cacheable(json!({"tools": []}), json!(60000), "public"),
            Duration::from_millis(500),
        )
    });
    let gw = gateway(&[up.addr], "");
    let addr = gw.mcp_addr;
    let threads: Vec<_> = (0..200)
        .map(|i| std::thread::spawn(move || rpc(addr, json!(i), "tools/list", json!({}), &[])))
        .collect();
    let replies: Vec<Reply> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    for (i, r) in replies.iter().enumerate() {
        assert_eq!(r.status, 200, "{}", r.text());
        assert_eq!(r.json()["id"], i as i64);
    }
    assert_eq!(up.count_method("tools/list"), 1);
    let m = scrape(&gw);
    assert!(
        sample(&m, "mcp_edge_cache_coalesced_waits_total", &[]) >= 1.0,
        "{m}"
    );
}

#[test]
fn a_flood_of_distinct_uris_never_takes_the_cache_over_max_bytes() {
    let pad = "p".repeat(3000);
    let up = Scripted::start(move |req| {
        let uri = req["params"]["uri"].clone();
        Script::Result(
            cacheable(
                json!({"contents": [{"uri": uri, "text": pad}]}),
                json!(60000),
                "public",
            ),
            NOW,
        )
    });
    let max = 65536.0;
    let cfg = config(
        &[("default", &[up.addr], "balance: round_robin")],
        "default_route: {pool: default, cache: {max_bytes: 65536, max_entries: 1000, max_entry_bytes: 8192}}\n",
    );
    let gw = RunningGateway::start(cfg).unwrap();
    for i in 0..300 {
        let r = read(&gw, i, &format!("flood://{i}"), &[]);
        assert_eq!(r.status, 200);
        if i % 25 == 0 {
            let bytes = sample(&scrape(&gw), "mcp_edge_cache_bytes", &[]);
            assert!(bytes <= max, "after {i}: {bytes} bytes");
        }
    }
    let m = scrape(&gw);
    let bytes = sample(&m, "mcp_edge_cache_bytes", &[]);
    assert!(bytes > 0.0 && bytes <= max, "{bytes}");
    assert!(
        sample(&m, "mcp_edge_cache_evictions_total", &[]) > 0.0,
        "{m}"
    );
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
    let body = json!({"jsonrpc": "2.0", "id": 4, "method": "prompts/list", "params": {"_meta": common::meta(json!({}))}});
    let headers = common::good_headers("resources/read", Some("file:///b"));
    let r = support::post(gw.mcp_addr, &common::hdrs(&headers), &body.to_string());
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

fn region_tools() -> Scripted {
    Scripted::start(|req| match req["method"].as_str().unwrap_or("") {
        "tools/list" => Script::Result(
            cacheable(
                json!({"tools": [{"name": "deploy", "inputSchema": {"type": "object",
                "properties": {"region": {"type": "string", "x-mcp-header": "Region"}}}}]}),
                json!(0),
                "public",
            ),
            NOW,
        ),
        _ => Script::Result(json!({"resultType": "complete", "content": []}), NOW),
    })
}

fn deploy(gw: &RunningGateway, id: i64, args: Value, region: Option<&str>) -> Reply {
    let extra: Vec<(&str, &str)> = region
        .map(|r| vec![("Mcp-Param-Region", r)])
        .unwrap_or_default();
    rpc(
        gw.mcp_addr,
        json!(id),
        "tools/call",
        json!({"name": "deploy", "arguments": args}),
        &extra,
    )
}

#[test]
fn g34_a_known_tools_marked_argument_needs_its_header() {
    let up = region_tools();
    let gw = gateway(&[up.addr], "");
    // Unknown tool (no tools/list seen yet): passes to the upstream.
    assert_eq!(
        deploy(&gw, 1, json!({"region": "us-west1"}), None).status,
        200
    );
    assert_eq!(up.count_method("tools/call"), 1);
    // Learn it (from a tools/list that is not even cacheable: ttlMs 0).
    assert_eq!(
        rpc(gw.mcp_addr, json!(2), "tools/list", json!({}), &[]).status,
        200
    );
    let missing = deploy(&gw, 3, json!({"region": "us-west1"}), None);
    assert_eq!((missing.status, missing.error_code()), (400, -32020));
    assert_eq!(
        missing.json()["error"]["data"]["header"],
        "Mcp-Param-Region"
    );
    assert_eq!(missing.json()["id"], 3);
    let wrong = deploy(&gw, 4, json!({"region": "us-west1"}), Some("eu-west1"));
    assert_eq!((wrong.status, wrong.error_code()), (400, -32020));
    assert_eq!(
        up.count_method("tools/call"),
        1,
        "refused calls never reach the upstream"
    );
    assert_eq!(
        deploy(&gw, 5, json!({"region": "us-west1"}), Some("us-west1")).status,
        200
    );
    assert_eq!(deploy(&gw, 6, json!({"region": null}), None).status, 200);
    assert_eq!(deploy(&gw, 7, json!({}), None).status, 200);
    assert_eq!(up.count_method("tools/call"), 4);
    let m = scrape(&gw);
    assert_eq!(
        sample(&m, "mcp_edge_cache_param_header_refusals_total", &[]),
        2.0
    );
}
