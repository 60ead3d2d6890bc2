//! Edge-cache invalidation over real sockets: `list_changed` and `resources/updated` seen on
//! streams the gateway proxies, an invalid cursor dropping a list's pages, the admin
//! purge, and a reload that changes a pool.

use crate::support::cache::*;
use crate::support::http::{request, rpc, SseStream};
use crate::support::{config, eventually};
use mcp_edge::gateway::RunningGateway;
use serde_json::json;
use std::time::Duration;

#[test]
fn list_changed_on_a_listen_stream_invalidates_the_pools_tools_list() {
    let pool = mcp_edge::backend::Pool::start(mcp_edge::backend::PoolOptions::local(1)).unwrap();
    let gw = gateway(pool.addrs(), "");
    rpc(gw.mcp_addr, json!(1), "tools/list", json!({}), &[]);
    assert!(
        cache_header(&rpc(gw.mcp_addr, json!(2), "tools/list", json!({}), &[])).starts_with("hit")
    );
    // A listen stream through the gateway.
    let params = json!({"notifications": {"toolsListChanged": true}, "_meta": crate::support::http::meta(json!({}))});
    let body = json!({"jsonrpc": "2.0", "id": "listen-1", "method": "subscriptions/listen", "params": params});
    let headers = crate::support::http::good_headers("subscriptions/listen", None);
    let mut stream = SseStream::open(
        gw.mcp_addr,
        &crate::support::http::hdrs(&headers),
        &body.to_string(),
    );
    assert_eq!(stream.status, 200);
    let ack = stream.next_message().unwrap();
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged");
    let t = crate::support::http::call(
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
fn resources_updated_drops_that_uri_and_an_invalid_cursor_drops_the_pages() {
    let up = resource_upstream();
    let gw = gateway(&[up.addr], "");
    read(&gw, 1, "file:///a", &[]);
    read(&gw, 2, "file:///b", &[]);
    let body = json!({"jsonrpc": "2.0", "id": 9, "method": "subscriptions/listen", "params": {"_meta": crate::support::http::meta(json!({}))}});
    let headers = crate::support::http::good_headers("subscriptions/listen", None);
    let mut stream = SseStream::open(
        gw.mcp_addr,
        &crate::support::http::hdrs(&headers),
        &body.to_string(),
    );
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
fn a_reload_that_changes_the_pool_drops_its_entries() {
    let (a, b) = (resource_upstream(), resource_upstream());
    let cfg = |addrs: &[std::net::SocketAddr]| {
        config(
            &[("default", addrs, "balance: round_robin")],
            "default_route: {pool: default}\n",
        )
    };
    let gw = RunningGateway::start(cfg(&[a.addr])).unwrap();
    read(&gw, 1, "file:///a", &[]);
    assert!(cache_header(&read(&gw, 2, "file:///a", &[])).starts_with("hit"));
    // The same pool: the entries stay.
    gw.reload(cfg(&[a.addr])).unwrap();
    assert!(cache_header(&read(&gw, 3, "file:///a", &[])).starts_with("hit"));
    // Another instance joins the pool: its entries are dropped.
    gw.reload(cfg(&[a.addr, b.addr])).unwrap();
    assert_eq!(cache_header(&read(&gw, 4, "file:///a", &[])), "miss");
    assert_eq!(
        a.count_method("resources/read") + b.count_method("resources/read"),
        2
    );
}
