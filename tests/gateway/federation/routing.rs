//! Routing by what a request names: virtual endpoints that refuse what they do not expose, the
//! `Mcp-Param-*` check learned from the catalog, prompts, resources (also through templates)
//! and completions.

use serde_json::{json, Value};
use std::time::Duration;

use super::scripted::{call_text, discover, two_servers};
use super::{gateway, names, rpc, rpc_at, wait_state};
use crate::support::scripted::{cacheable, Script, Scripted};

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
fn param_headers_learned_from_the_catalog_are_enforced_on_prefixed_calls() {
    let s = Scripted::start(|req: &Value| {
        let r = match req["method"].as_str().unwrap_or("") {
            "server/discover" => discover(json!({"tools": {}})),
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
            "server/discover" => {
                discover(json!({"prompts": {}, "resources": {}, "completions": {}}))
            }
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

#[test]
fn the_edge_cache_and_rate_limits_work_on_learned_routes() {
    let p = Scripted::start(|req: &Value| {
        let r = match req["method"].as_str().unwrap_or("") {
            "server/discover" => discover(json!({"tools": {}, "resources": {}})),
            "tools/list" => cacheable(
                json!({"tools": [{"name": "ping", "inputSchema": {"type": "object"}}]}),
                json!(60_000),
                "public",
            ),
            "resources/list" => cacheable(
                json!({"resources": [{"uri": "docs://readme", "name": "readme"}]}),
                json!(60_000),
                "public",
            ),
            "resources/templates/list" => {
                cacheable(json!({"resourceTemplates": []}), json!(60_000), "public")
            }
            "resources/read" => cacheable(
                json!({"contents": [{"uri": "docs://readme", "text": "read me"}]}),
                json!(60_000),
                "public",
            ),
            _ => json!({"resultType": "complete", "content": [{"type": "text", "text": "pong"}]}),
        };
        Script::Result(r, Duration::ZERO)
    });
    let limits = "rate_limits:\n  - {name: pings, match: {method: tools/call, name: p__ping}, rate: 2/minute}\n";
    let gw = super::gateway_with(
        &[("p", &[p.addr])],
        "  endpoints:\n    - {path: /mcp, pools: [p]}\n",
        limits,
    );
    wait_state(&gw, &["p"], "fresh");
    for _ in 0..3 {
        let r = rpc(&gw, "resources/read", json!({"uri": "docs://readme"}));
        assert_eq!(r.result()["contents"][0]["text"], "read me");
    }
    assert_eq!(
        p.count_method("resources/read"),
        1,
        "the learned route's edge cache served the rest"
    );
    assert_eq!(call_text(&gw, "/mcp", "p__ping").unwrap(), "pong");
    assert_eq!(call_text(&gw, "/mcp", "p__ping").unwrap(), "pong");
    let limited = rpc(
        &gw,
        "tools/call",
        json!({"name": "p__ping", "arguments": {}}),
    );
    assert_eq!(limited.status, 429, "{}", limited.text());
    assert!(limited.header("retry-after").is_some());
}

#[test]
fn an_h2c_client_lists_and_calls_through_a_federated_endpoint() {
    use crate::support::tls::h2client::{connect_plain, exchange, request};
    let (a, b) = super::scripted::two_servers();
    let h2c = std::net::SocketAddr::from(([127, 0, 0, 1], crate::support::free_port()));
    let y = format!(
        "work_stealing: true\nlisten:\n  mcp: 127.0.0.1:{}\n  extra: [ {{ address: {h2c}, h2c: true }} ]\n  admin: 127.0.0.1:{}\npools:\n  a: {{instances: [{}]}}\n  b: {{instances: [{}]}}\nfederation:\n  endpoints:\n    - {{path: /mcp, pools: [a, b]}}\n",
        crate::support::free_port(),
        crate::support::free_port(),
        a.s.addr,
        b.s.addr
    );
    let gw = mcp_edge::gateway::RunningGateway::start(
        mcp_edge::config::Config::parse(&y, "h2c.yaml").unwrap(),
    )
    .unwrap();
    wait_state(&gw, &["a", "b"], "fresh");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut send = connect_plain(h2c).await;
        let list = crate::support::plain(1, "tools/list");
        let h = [
            ("content-type", "application/json"),
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/list"),
        ];
        let (status, _, body) =
            exchange(&mut send, request("127.0.0.1", "http", &h), list.as_bytes()).await;
        assert_eq!(status, 200);
        let v: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["result"]["tools"].as_array().unwrap().len(), 4, "{v}");
        let h = crate::support::call_headers("b__ship");
        let (status, _, body) = exchange(
            &mut send,
            request("127.0.0.1", "http", &crate::support::refs(&h)),
            crate::support::call(2, "b__ship").as_bytes(),
        )
        .await;
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
        let v: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["result"]["content"][0]["text"], "b:ship");
    });
    assert_eq!(
        b.s.seen()
            .iter()
            .rfind(|v| v["method"] == "tools/call")
            .unwrap()["params"]["name"],
        "ship"
    );
}
