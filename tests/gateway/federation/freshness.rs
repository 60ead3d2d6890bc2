//! Freshness: aggregated `ttlMs`/`cacheScope` (a `ttlMs: 0` list asked again for every answer, a
//! long-lived public one once), a pool going down (stale catalog, then expired), `list_changed`
//! making a new tool callable, and one listen stream carrying every pool's notifications.

use serde_json::{json, Value};
use std::time::Duration;

use super::scripted::{call_text, pair, server, two_servers};
use super::{gateway, rpc, wait_state};

#[test]
fn merged_hints_are_the_strictest_and_a_ttl0_list_is_asked_for_every_answer() {
    let a = server("a", &["slow"], 60_000, "public");
    let b = server("b", &["fast"], 0, "public");
    let gw = pair(&a, &b, "  endpoints:\n    - {path: /mcp, pools: [a, b]}\n");
    wait_state(&gw, &["a", "b"], "fresh");
    let (a0, b0) = (
        a.s.count_method("tools/list"),
        b.s.count_method("tools/list"),
    );
    for _ in 0..3 {
        let r = rpc(&gw, "tools/list", json!({})).result();
        assert_eq!(
            (r["ttlMs"].clone(), r["cacheScope"].clone()),
            (json!(0), json!("public")),
            "{r}"
        );
        assert_eq!(r["tools"].as_array().unwrap().len(), 2);
    }
    assert_eq!(
        a.s.count_method("tools/list"),
        a0,
        "a fresh public list is served from the catalog"
    );
    let b_asked = b.s.count_method("tools/list") - b0;
    assert!(
        b_asked >= 3,
        "a ttlMs: 0 list is asked again for every answer (asked {b_asked} times)"
    );
    // A private list anywhere makes the merged answer private; ttlMs is the smallest left.
    let c = server("c", &["mine"], 30_000, "private");
    let gw2 = gateway(
        &[("a", &[a.s.addr]), ("c", &[c.s.addr])],
        "  endpoints:\n    - {path: /mcp, pools: [a, c]}\n",
    );
    wait_state(&gw2, &["a", "c"], "fresh");
    let c0 = c.s.count_method("tools/list");
    let r = rpc(&gw2, "tools/list", json!({})).result();
    let ttl = r["ttlMs"].as_u64().unwrap();
    assert_eq!(r["cacheScope"], "private");
    assert!(ttl > 0 && ttl <= 30_000, "{r}");
    assert_eq!(
        c.s.count_method("tools/list"),
        c0 + 1,
        "a private list is fetched for the answer"
    );
}

#[test]
fn a_pool_that_goes_down_keeps_its_catalog_stale_then_loses_it() {
    let a = server("a", &["one"], 1_000, "public");
    let b = server("b", &["two"], 1_000, "public");
    let gw = pair(&a, &b, "  catalog: {refresh_floor: 200ms, refresh_ceiling: 1s, keep_stale: 3s, timeout: 1s}\n  endpoints:\n    - {path: /mcp, pools: [a, b]}\n",
    );
    wait_state(&gw, &["a", "b"], "fresh");
    drop(b);
    wait_state(&gw, &["b"], "stale");
    let r = rpc(&gw, "tools/list", json!({})).result();
    assert_eq!(
        r["tools"].as_array().unwrap().len(),
        2,
        "the stale catalog still lists b: {r}"
    );
    assert_eq!(r["ttlMs"], 0, "a partial or stale answer is never reusable");
    assert_eq!(r["_meta"]["io.mcp-edge/unavailable"], json!(["b"]));
    let down = rpc(
        &gw,
        "tools/call",
        json!({"name": "b__two", "arguments": {}}),
    );
    assert_eq!(
        down.status, 502,
        "routed to b by the stale catalog: b cannot be reached"
    );
    wait_state(&gw, &["b"], "expired");
    let gone = rpc(
        &gw,
        "tools/call",
        json!({"name": "b__two", "arguments": {}}),
    );
    assert_eq!(
        (gone.status, gone.error_code()),
        (503, -31003),
        "{}",
        gone.text()
    );
    let r = rpc(&gw, "tools/list", json!({})).result();
    assert_eq!(r["tools"].as_array().unwrap().len(), 1);
    assert_eq!(call_text(&gw, "/mcp", "a__one").unwrap(), "a:one");
    let m = crate::support::scrape(&gw);
    assert!(
        m.contains("mcp_edge_catalog_state{pool=\"b\",state=\"expired\"} 1"),
        "{m}"
    );
}

#[test]
fn list_changed_on_a_listen_stream_makes_a_new_tool_callable() {
    let a = server("a", &["old"], 600_000, "public");
    let gw = gateway(
        &[("a", &[a.s.addr])],
        "  endpoints:\n    - {path: /mcp, pools: [a]}\n",
    );
    wait_state(&gw, &["a"], "fresh");
    assert_eq!(call_text(&gw, "/mcp", "a__new"), Err(-32602));
    let mut stream = listen(&gw, "l", json!({"toolsListChanged": true}));
    assert!(stream.next_message().is_some(), "the acknowledgement");
    let listening = || a.s.count_method("subscriptions/listen") == 1;
    assert!(crate::support::eventually(
        Duration::from_secs(5),
        listening
    ));
    a.tools.lock().unwrap().push("new".into());
    a.s.notify(json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}));
    assert_eq!(
        stream.next_message().unwrap()["method"],
        "notifications/tools/list_changed"
    );
    // Within the refresh loop's tick, not the list's ten-minute ttlMs.
    assert!(crate::support::eventually(Duration::from_secs(5), || {
        call_text(&gw, "/mcp", "a__new").is_ok()
    }));
    assert_eq!(call_text(&gw, "/mcp", "a__new").unwrap(), "a:new");
}

#[test]
fn one_listen_stream_carries_the_notifications_of_every_pool() {
    let (a, b) = two_servers();
    let gw = pair(&a, &b, "  endpoints:\n    - {path: /mcp, pools: [a, b]}\n");
    wait_state(&gw, &["a", "b"], "fresh");
    let changes = json!({"toolsListChanged": true, "resourcesListChanged": true});
    let mut stream = listen(&gw, "sub-7", changes);
    let ack = stream.next_message().unwrap();
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged");
    assert_eq!(
        ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        "sub-7"
    );
    // Both pools were asked, with the client's own request; their acknowledgements stay theirs.
    assert!(crate::support::eventually(Duration::from_secs(5), || {
        a.s.count_method("subscriptions/listen") == 1
            && b.s.count_method("subscriptions/listen") == 1
    }));
    assert_eq!(
        b.s.seen()
            .iter()
            .find(|v| v["method"] == "subscriptions/listen")
            .unwrap()["id"],
        "sub-7"
    );
    a.s.notify(json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed", "params": {"from": "a"}}));
    b.s.notify(json!({"jsonrpc": "2.0", "method": "notifications/resources/list_changed", "params": {"from": "b"}}));
    let mut got: Vec<String> = (0..2)
        .map(|_| {
            stream.next_message().unwrap()["params"]["from"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    got.sort();
    assert_eq!(got, ["a", "b"]);
}

/// Open `subscriptions/listen` (request id `id`, for `changes`) through the gateway.
fn listen(
    gw: &mcp_edge::gateway::RunningGateway,
    id: &str,
    changes: Value,
) -> crate::support::http::SseStream {
    let params = json!({"notifications": changes, "_meta": crate::support::http::meta(json!({}))});
    let body =
        json!({"jsonrpc": "2.0", "id": id, "method": "subscriptions/listen", "params": params});
    let headers = crate::support::http::good_headers("subscriptions/listen", None);
    let hs = crate::support::http::hdrs(&headers);
    let stream = crate::support::http::SseStream::open(gw.mcp_addr, &hs, &body.to_string());
    assert_eq!(stream.status, 200);
    stream
}
