//! Naming under each collision policy, and the merged lists' pages and cursors.

use serde_json::{json, Value};
use std::time::Duration;

use super::scripted::{call_text, pair, two_servers};
use super::{catalog, names, rpc, rpc_at, wait_state};

#[test]
fn prefix_names_every_tool_and_calls_reach_the_server_under_its_own_name() {
    let (a, b) = two_servers();
    let gw = pair(&a, &b, "  endpoints:\n    - {path: /mcp, pools: [a, b]}\n");
    wait_state(&gw, &["a", "b"], "fresh");
    let list = rpc(&gw, "tools/list", json!({}));
    assert_eq!(
        names(&list, "tools", "name"),
        ["a__greet", "a__pay", "b__greet", "b__ship"]
    );
    assert_eq!(call_text(&gw, "/mcp", "b__greet").unwrap(), "b:greet");
    assert_eq!(call_text(&gw, "/mcp", "a__greet").unwrap(), "a:greet");
    // The server saw its own name in the body: the gateway put it back after the check.
    let seen = b.s.seen();
    let call = seen.iter().find(|v| v["method"] == "tools/call").unwrap();
    assert_eq!(call["params"]["name"], "greet");
    assert_eq!(
        call_text(&gw, "/mcp", "greet"),
        Err(-32602),
        "unprefixed names are not exposed"
    );
    assert_eq!(catalog(&gw)["endpoints"][0]["collisions"], json!([]));
    // The check runs on what the client sent, before the name is put back: a header naming
    // a__greet over a body naming b__greet is refused, and neither server is asked.
    let calls = a.s.count_method("tools/call") + b.s.count_method("tools/call");
    let mut h = crate::support::http::good_headers("tools/call", Some("a__greet"));
    h.push(("Accept".into(), "application/json".into()));
    let body = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "b__greet", "arguments": {}, "_meta": crate::support::http::meta(json!({}))}});
    let r = crate::support::http::post(
        gw.mcp_addr,
        &crate::support::http::hdrs(&h),
        &body.to_string(),
    );
    assert_eq!(r.error_code(), -32020, "{}", r.text());
    assert_eq!(
        a.s.count_method("tools/call") + b.s.count_method("tools/call"),
        calls
    );
}

#[test]
fn priority_gives_a_collision_to_the_first_pool_and_reports_it() {
    let (a, b) = two_servers();
    let gw = pair(
        &a,
        &b,
        "  endpoints:\n    - {path: /mcp, pools: [b, a], collisions: priority}\n",
    );
    wait_state(&gw, &["a", "b"], "fresh");
    let list = rpc(&gw, "tools/list", json!({}));
    assert_eq!(names(&list, "tools", "name"), ["greet", "ship", "pay"]);
    assert_eq!(
        call_text(&gw, "/mcp", "greet").unwrap(),
        "b:greet",
        "b is listed first"
    );
    assert_eq!(call_text(&gw, "/mcp", "pay").unwrap(), "a:pay");
    let c = &catalog(&gw)["endpoints"][0]["collisions"];
    assert_eq!(
        c,
        &json!([{"kind": "tools", "name": "greet", "pools": ["b", "a"], "served_by": "b"}])
    );
    let m = crate::support::scrape(&gw);
    assert!(
        m.contains("mcp_edge_federation_collisions{endpoint=\"/mcp\"} 1"),
        "{m}"
    );
}

#[test]
fn refuse_exposes_a_colliding_name_nowhere() {
    let (a, b) = two_servers();
    let gw = pair(
        &a,
        &b,
        "  endpoints:\n    - {path: /mcp, pools: [a, b], collisions: refuse}\n",
    );
    wait_state(&gw, &["a", "b"], "fresh");
    let list = rpc(&gw, "tools/list", json!({}));
    assert_eq!(names(&list, "tools", "name"), ["pay", "ship"]);
    assert_eq!(call_text(&gw, "/mcp", "greet"), Err(-32602));
    assert_eq!(
        a.s.count_method("tools/call") + b.s.count_method("tools/call"),
        0,
        "no server was asked"
    );
    assert_eq!(call_text(&gw, "/mcp", "ship").unwrap(), "b:ship");
    let c = &catalog(&gw)["endpoints"][0]["collisions"][0];
    assert_eq!(
        (c["name"].clone(), c["served_by"].clone()),
        (json!("greet"), Value::Null)
    );
}

#[test]
fn merged_lists_page_with_cursors_that_cannot_be_forged_or_moved() {
    let (a, b) = two_servers();
    let gw = pair(&a, &b, "  endpoints:\n    - {path: /mcp, pools: [a, b], page_size: 3}\n    - {path: /mcp/b, pools: [b], page_size: 1}\n",
    );
    wait_state(&gw, &["a", "b"], "fresh");
    let first = rpc(&gw, "tools/list", json!({}));
    assert_eq!(
        names(&first, "tools", "name"),
        ["a__greet", "a__pay", "b__greet"]
    );
    let cursor = first.result()["nextCursor"].as_str().unwrap().to_string();
    let second = rpc(&gw, "tools/list", json!({"cursor": cursor}));
    assert_eq!(names(&second, "tools", "name"), ["b__ship"]);
    assert!(second.result().get("nextCursor").is_none());
    // A cursor of /mcp means nothing on /mcp/b; a forged one, or one past the end, neither.
    let moved = rpc_at(&gw, "/mcp/b", "tools/list", json!({"cursor": cursor}));
    assert_eq!(moved.error_code(), -32602);
    let forged = rpc(
        &gw,
        "tools/list",
        json!({"cursor": "bWNwLWVkZ2UtYzEKL21jcAp0b29scy9saXN0Cjk5Cng"}),
    );
    assert_eq!(forged.error_code(), -32602);
    assert_eq!(
        rpc(&gw, "tools/list", json!({"cursor": 7})).error_code(),
        -32602
    );
    // The list changes under a cursor (a tool appears on a refresh): the cursor is stale.
    a.tools.lock().unwrap().push("zap".into());
    gw.current().catalogs.due_at("a", std::time::Instant::now());
    assert!(crate::support::eventually(Duration::from_secs(10), || {
        rpc(&gw, "tools/list", json!({"cursor": cursor}))
            .json()
            .get("error")
            .is_some()
    }));
    assert_eq!(call_text(&gw, "/mcp", "a__zap").unwrap(), "a:zap");
}
