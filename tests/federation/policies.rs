//! Federation against scripted servers: each answers `server/discover`, `tools/list` (its
//! current tools, with the `ttlMs`/`cacheScope` the test chose) and `tools/call` (naming
//! itself and the tool it was asked for), and records every request it receives.

use serde_json::{json, Value};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::{catalog, gateway, names, rpc, rpc_at, wait_state};
use crate::support::scripted::{cacheable, Script, Scripted};

/// One scripted MCP server: `label` names it in call results.
struct Server {
    s: Scripted,
    tools: Arc<Mutex<Vec<String>>>,
}

fn server(label: &'static str, tools: &[&str], ttl: u64, scope: &'static str) -> Server {
    let list = Arc::new(Mutex::new(
        tools.iter().map(|t| t.to_string()).collect::<Vec<_>>(),
    ));
    let l = list.clone();
    let s = Scripted::start(move |req: &Value| {
        let result = match req["method"].as_str().unwrap_or("") {
            "server/discover" => cacheable(
                json!({"supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}}}),
                json!(ttl),
                scope,
            ),
            "tools/list" => {
                let tools: Vec<Value> = l
                    .lock()
                    .unwrap()
                    .iter()
                    .map(|n| json!({"name": n, "inputSchema": {"type": "object"}}))
                    .collect();
                cacheable(json!({ "tools": tools }), json!(ttl), scope)
            }
            "tools/call" => {
                let text = format!("{label}:{}", req["params"]["name"].as_str().unwrap_or("?"));
                json!({"resultType": "complete", "content": [{"type": "text", "text": text}]})
            }
            "subscriptions/listen" => return Script::Listen,
            _ => return Script::Error(-32601),
        };
        Script::Result(result, Duration::ZERO)
    });
    Server { s, tools: list }
}

fn call_text(
    gw: &mcp_edge::gateway::RunningGateway,
    path: &str,
    tool: &str,
) -> Result<String, i64> {
    let r = rpc_at(
        gw,
        path,
        "tools/call",
        json!({"name": tool, "arguments": {}}),
    );
    let v = r.json();
    match v.get("result") {
        Some(res) => Ok(res["content"][0]["text"].as_str().unwrap().to_string()),
        None => Err(v["error"]["code"].as_i64().unwrap_or(0)),
    }
}

fn two_servers() -> (Server, Server) {
    (
        server("a", &["greet", "pay"], 60_000, "public"),
        server("b", &["greet", "ship"], 60_000, "public"),
    )
}

#[test]
fn prefix_names_every_tool_and_calls_reach_the_server_under_its_own_name() {
    let (a, b) = two_servers();
    let gw = gateway(
        &[("a", &[a.s.addr]), ("b", &[b.s.addr])],
        "  endpoints:\n    - {path: /mcp, pools: [a, b]}\n",
    );
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
    let gw = gateway(
        &[("a", &[a.s.addr]), ("b", &[b.s.addr])],
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
    let gw = gateway(
        &[("a", &[a.s.addr]), ("b", &[b.s.addr])],
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
    let gw = gateway(
        &[("a", &[a.s.addr]), ("b", &[b.s.addr])],
        "  endpoints:\n    - {path: /mcp, pools: [a, b], page_size: 3}\n    - {path: /mcp/b, pools: [b], page_size: 1}\n",
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

#[test]
fn merged_hints_are_the_strictest_and_a_ttl0_list_is_asked_for_every_answer() {
    let a = server("a", &["slow"], 60_000, "public");
    let b = server("b", &["fast"], 0, "public");
    let gw = gateway(
        &[("a", &[a.s.addr]), ("b", &[b.s.addr])],
        "  endpoints:\n    - {path: /mcp, pools: [a, b]}\n",
    );
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
    let gw = gateway(
        &[("a", &[a.s.addr]), ("b", &[b.s.addr])],
        "  catalog: {refresh_floor: 200ms, refresh_ceiling: 1s, keep_stale: 3s, timeout: 1s}\n  endpoints:\n    - {path: /mcp, pools: [a, b]}\n",
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
    let params = json!({"notifications": {"toolsListChanged": true}, "_meta": crate::support::http::meta(json!({}))});
    let body =
        json!({"jsonrpc": "2.0", "id": "l", "method": "subscriptions/listen", "params": params});
    let headers = crate::support::http::good_headers("subscriptions/listen", None);
    let mut stream = crate::support::http::SseStream::open(
        gw.mcp_addr,
        &crate::support::http::hdrs(&headers),
        &body.to_string(),
    );
    assert_eq!(stream.status, 200);
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
fn a_virtual_endpoint_refuses_the_tools_it_does_not_expose() {
    let (a, b) = two_servers();
    let reference =
        mcp_edge::backend::Pool::start(mcp_edge::backend::PoolOptions::local(1)).unwrap();
    let gw = gateway(
        &[("a", &[a.s.addr]), ("b", &[b.s.addr]), ("reference", reference.addrs())],
        "  endpoints:\n    - {path: /mcp, pools: [a, b]}\n    - path: /mcp/shipping\n      pools: [b, reference]\n      tools: {include: [\"b__*\", reference__echo], exclude: [b__greet]}\n",
    );
    wait_state(&gw, &["a", "b", "reference"], "fresh");
    let list = rpc_at(&gw, "/mcp/shipping", "tools/list", json!({}));
    assert_eq!(
        names(&list, "tools", "name"),
        ["b__ship", "reference__echo"]
    );
    // Refused, not only hidden: b serves greet, and /mcp exposes it.
    assert_eq!(call_text(&gw, "/mcp/shipping", "b__greet"), Err(-32602));
    assert_eq!(call_text(&gw, "/mcp/shipping", "a__pay"), Err(-32602));
    assert_eq!(call_text(&gw, "/mcp", "b__greet").unwrap(), "b:greet");
    assert_eq!(
        b.s.count(|v| v["params"]["name"] == "greet" && v["method"] == "tools/call"),
        1
    );
    // The reference backend answers only at /mcp: the gateway asks it there.
    let echo = rpc_at(
        &gw,
        "/mcp/shipping",
        "tools/call",
        json!({"name": "reference__echo", "arguments": {"text": "via a virtual endpoint"}}),
    );
    assert_eq!(
        echo.result()["content"][0]["text"],
        "via a virtual endpoint"
    );
    let d = rpc_at(&gw, "/mcp/shipping", "server/discover", json!({})).result();
    assert_eq!(
        d["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "mcp-edge"
    );
    assert!(
        d["capabilities"].get("tools").is_some() && d["capabilities"].get("prompts").is_some(),
        "{d}"
    );
}

#[test]
fn one_listen_stream_carries_the_notifications_of_every_pool() {
    let (a, b) = two_servers();
    let gw = gateway(
        &[("a", &[a.s.addr]), ("b", &[b.s.addr])],
        "  endpoints:\n    - {path: /mcp, pools: [a, b]}\n",
    );
    wait_state(&gw, &["a", "b"], "fresh");
    let params = json!({"notifications": {"toolsListChanged": true, "resourcesListChanged": true}, "_meta": crate::support::http::meta(json!({}))});
    let body = json!({"jsonrpc": "2.0", "id": "sub-7", "method": "subscriptions/listen", "params": params});
    let headers = crate::support::http::good_headers("subscriptions/listen", None);
    let mut stream = crate::support::http::SseStream::open(
        gw.mcp_addr,
        &crate::support::http::hdrs(&headers),
        &body.to_string(),
    );
    assert_eq!(stream.status, 200);
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

#[test]
fn param_headers_learned_from_the_catalog_are_enforced_on_prefixed_calls() {
    let s = Scripted::start(|req: &Value| {
        let r = match req["method"].as_str().unwrap_or("") {
            "server/discover" => cacheable(
                json!({"supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}}}),
                json!(60_000),
                "public",
            ),
            "tools/list" => {
                let schema = json!({"type": "object", "properties": {"region": {"type": "string", "x-mcp-header": "Region"}}});
                cacheable(
                    json!({"tools": [{"name": "forecast", "inputSchema": schema}]}),
                    json!(60_000),
                    "public",
                )
            }
            _ => json!({"resultType": "complete", "content": [{"type": "text", "text": "sunny"}]}),
        };
        Script::Result(r, Duration::ZERO)
    });
    let gw = gateway(
        &[("w", &[s.addr])],
        "  endpoints:\n    - {path: /mcp, pools: [w]}\n",
    );
    wait_state(&gw, &["w"], "fresh");
    // No tools/list has passed through: the catalog taught the gateway the marked argument.
    let r = rpc(
        &gw,
        "tools/call",
        json!({"name": "w__forecast", "arguments": {"region": "eu"}}),
    );
    assert_eq!((r.status, r.error_code()), (400, -32020), "{}", r.text());
    assert_eq!(s.count_method("tools/call"), 0);
    let mut h = crate::support::http::good_headers("tools/call", Some("w__forecast"));
    h.push(("Mcp-Param-Region".into(), "eu".into()));
    let body = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "w__forecast", "arguments": {"region": "eu"}, "_meta": crate::support::http::meta(json!({}))}});
    let ok = crate::support::http::post(
        gw.mcp_addr,
        &crate::support::http::hdrs(&h),
        &body.to_string(),
    );
    assert_eq!(ok.result()["content"][0]["text"], "sunny");
}

#[test]
fn prompts_resources_templates_and_completions_route_by_what_they_name() {
    let p = Scripted::start(|req: &Value| {
        let r = match req["method"].as_str().unwrap_or("") {
            "server/discover" => cacheable(
                json!({"supportedVersions": ["2026-07-28"], "capabilities": {"prompts": {}, "resources": {}, "completions": {}}}),
                json!(60_000),
                "public",
            ),
            "prompts/list" => cacheable(
                json!({"prompts": [{"name": "brief"}]}),
                json!(60_000),
                "public",
            ),
            "resources/list" => cacheable(json!({"resources": []}), json!(60_000), "public"),
            "resources/templates/list" => cacheable(
                json!({"resourceTemplates": [{"uriTemplate": "notes://{id}", "name": "note"}]}),
                json!(60_000),
                "public",
            ),
            "completion/complete" => {
                json!({"resultType": "complete", "completion": {"values": ["from-p"]}})
            }
            "resources/read" => cacheable(
                json!({"contents": [{"uri": req["params"]["uri"], "text": "a note"}]}),
                json!(0),
                "public",
            ),
            _ => json!({"resultType": "complete", "messages": []}),
        };
        Script::Result(r, Duration::ZERO)
    });
    let reference =
        mcp_edge::backend::Pool::start(mcp_edge::backend::PoolOptions::local(1)).unwrap();
    let gw = gateway(
        &[("p", &[p.addr]), ("reference", reference.addrs())],
        "  endpoints:\n    - {path: /mcp, pools: [reference, p]}\n",
    );
    wait_state(&gw, &["p", "reference"], "fresh");
    let prompts = rpc(&gw, "prompts/list", json!({}));
    assert!(names(&prompts, "prompts", "name").contains(&"p__brief".to_string()));
    rpc(&gw, "prompts/get", json!({"name": "p__brief"})).result();
    assert_eq!(
        p.seen()
            .iter()
            .find(|v| v["method"] == "prompts/get")
            .unwrap()["params"]["name"],
        "brief"
    );
    // A URI through a pool's template, and one through the other pool's.
    let note = rpc(&gw, "resources/read", json!({"uri": "notes://42"})).result();
    assert_eq!(note["contents"][0]["text"], "a note");
    let data = rpc(
        &gw,
        "resources/read",
        json!({"uri": "test://template/7/data"}),
    )
    .result();
    assert!(
        data["contents"][0]["text"].as_str().unwrap().contains('7'),
        "{data}"
    );
    assert_eq!(p.count_method("resources/read"), 1);
    assert_eq!(
        rpc(&gw, "resources/read", json!({"uri": "nowhere://x"})).error_code(),
        -32602
    );
    // completion/complete names its target in params.ref: routed there and renamed.
    let c = rpc(&gw, "completion/complete", json!({"ref": {"type": "ref/prompt", "name": "p__brief"}, "argument": {"name": "x", "value": "a"}})).result();
    assert_eq!(c["completion"]["values"], json!(["from-p"]));
    let seen = p.seen();
    let sent = seen
        .iter()
        .find(|v| v["method"] == "completion/complete")
        .unwrap();
    assert_eq!(sent["params"]["ref"]["name"], "brief");
    let templates = rpc(&gw, "resources/templates/list", json!({}));
    let t = names(&templates, "resourceTemplates", "uriTemplate");
    assert!(
        t.contains(&"notes://{id}".to_string())
            && t.contains(&"test://template/{id}/data".to_string()),
        "{t:?}"
    );
}
