//! Protocol cases B1–B38 (digest §11.B) against a real backend pool over HTTP on 127.0.0.1.

mod support;

use support::http::*;

use mcp_edge::backend::{Pool, PoolOptions};
use serde_json::{json, Value};
use std::time::Duration;

fn pool() -> Pool {
    Pool::start(PoolOptions::local(1)).expect("start pool")
}

const META_OK: &str = r#"{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}"#;

#[test]
fn b1_discover() {
    let p = pool();
    let r = rpc(p.addrs()[0], json!(1), "server/discover", json!({}), &[]);
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("application/json"));
    let res = r.result();
    assert_eq!(res["resultType"], "complete");
    assert!(res["supportedVersions"]
        .as_array()
        .unwrap()
        .contains(&json!("2026-07-28")));
    assert!(res["capabilities"]["tools"].is_object());
    assert!(res["ttlMs"].as_u64().is_some());
    assert!(matches!(
        res["cacheScope"].as_str(),
        Some("public" | "private")
    ));
    assert_eq!(
        res["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "mcp-edge-backend"
    );
    assert_eq!(instance_of(&res), p.instance_ids()[0]);
    assert!(r.header("mcp-session-id").is_none());
}

#[test]
fn b2_to_b5_meta_fields() {
    let p = pool();
    let a = p.addrs()[0];
    let cases: &[(&str, Value, u16, Option<i64>)] = &[
        ("no _meta", json!({}), 400, Some(-32602)),
        (
            "no protocolVersion",
            json!({"_meta": {"io.modelcontextprotocol/clientCapabilities": {}}}),
            400,
            Some(-32602),
        ),
        (
            "no clientCapabilities",
            json!({"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}),
            400,
            Some(-32602),
        ),
        (
            "no clientInfo",
            json!({"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}}),
            200,
            None,
        ),
    ];
    for (i, (what, params, status, code)) in cases.iter().enumerate() {
        let h = good_headers("server/discover", None);
        let body =
            json!({"jsonrpc": "2.0", "id": 100 + i, "method": "server/discover", "params": params});
        let r = post(a, &hdrs(&h), &body.to_string());
        assert_eq!(r.status, *status, "{what}: {}", r.text());
        assert_eq!(r.code(), *code, "{what}");
        assert_eq!(r.json()["id"], json!(100 + i), "{what}: the id is echoed");
    }
}

#[test]
fn b6_b7_versions() {
    let p = pool();
    let a = p.addrs()[0];
    let mut m = meta(json!({}));
    m["io.modelcontextprotocol/protocolVersion"] = json!("v999.0.0");
    // B6: header 2026-07-28, body v999 → -32020.
    let r = rpc(a, json!(6), "server/discover", json!({"_meta": m}), &[]);
    assert_eq!((r.status, r.code()), (400, Some(-32020)), "{}", r.text());
    // B7: both v999 → -32022 with supported/requested.
    let r = rpc(
        a,
        json!(7),
        "server/discover",
        json!({"_meta": m}),
        &[("MCP-Protocol-Version", "v999.0.0")],
    );
    assert_eq!((r.status, r.code()), (400, Some(-32022)), "{}", r.text());
    let data = &r.json()["error"]["data"];
    assert_eq!(data["supported"], json!(["2026-07-28"]));
    assert_eq!(data["requested"], "v999.0.0");
    assert_eq!(r.json()["id"], 7);
}

#[test]
fn b8_removed_and_unknown_methods_are_404() {
    let p = pool();
    for (i, m) in [
        "initialize",
        "ping",
        "logging/setLevel",
        "resources/subscribe",
        "resources/unsubscribe",
        "unknown/method",
        // Tasks v1 methods removed by SEP-2663 (tasks/get etc. exist: tests/backend_tasks.rs).
        "tasks/list",
        "tasks/result",
    ]
    .iter()
    .enumerate()
    {
        let r = rpc(p.addrs()[0], json!(i), m, json!({}), &[]);
        assert_eq!(
            (r.status, r.code()),
            (404, Some(-32601)),
            "{m}: {}",
            r.text()
        );
        assert_eq!(r.json()["id"], json!(i), "{m}");
    }
}

#[test]
fn b9_b29_lists_and_reads_carry_cache_hints_and_b26_never_input_required() {
    let p = pool();
    let a = p.addrs()[0];
    let elicit_caps = json!({"elicitation": {}, "sampling": {}, "roots": {}});
    for (method, key) in [
        ("tools/list", "tools"),
        ("prompts/list", "prompts"),
        ("resources/list", "resources"),
        ("resources/templates/list", "resourceTemplates"),
    ] {
        let r = rpc(
            a,
            json!(1),
            method,
            json!({"_meta": meta(elicit_caps.clone())}),
            &[],
        );
        let res = r.result();
        assert_eq!(res["resultType"], "complete", "{method}");
        assert!(
            res[key].as_array().is_some_and(|v| !v.is_empty()),
            "{method}: {res}"
        );
        assert!(res["ttlMs"].as_u64().is_some(), "{method}");
        assert!(
            matches!(res["cacheScope"].as_str(), Some("public" | "private")),
            "{method}"
        );
    }
    let r = rpc(
        a,
        json!(2),
        "resources/read",
        json!({"uri": "test://static-text"}),
        &[],
    );
    let res = r.result();
    assert_eq!(res["contents"][0]["uri"], "test://static-text");
    assert!(res["ttlMs"].as_u64().is_some() && res["cacheScope"].is_string());
    let r = rpc(
        a,
        json!(3),
        "completion/complete",
        json!({"ref": {"type": "ref/prompt", "name": "test_prompt_with_arguments"}, "argument": {"name": "arg1", "value": "par"}}),
        &[],
    );
    assert_eq!(
        r.result()["completion"]["values"],
        json!(["paris", "park", "party"])
    );
    // The deploy tool declares an x-mcp-header.
    let tools = rpc(a, json!(4), "tools/list", json!({}), &[]).result();
    let deploy = tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "deploy")
        .unwrap()
        .clone();
    assert_eq!(
        deploy["inputSchema"]["properties"]["environment"]["x-mcp-header"],
        "Environment"
    );
}

#[test]
fn b10_b24_missing_capability() {
    let p = pool();
    let a = p.addrs()[0];
    let r = call(
        a,
        10,
        "test_missing_capability",
        json!({}),
        json!({}),
        None,
        json!({}),
    );
    assert_eq!((r.status, r.code()), (400, Some(-32021)), "{}", r.text());
    assert_eq!(
        r.json()["error"]["data"]["requiredCapabilities"],
        json!({"sampling": {}})
    );
    assert_eq!(r.json()["id"], 10);
    // B24: only sampling declared → no elicitation request.
    let r = call(
        a,
        11,
        "test_input_required_result_capabilities",
        json!({}),
        json!({"sampling": {}}),
        None,
        json!({}),
    );
    let res = r.result();
    assert_eq!(res["resultType"], "input_required");
    let methods: Vec<&str> = res["inputRequests"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v["method"].as_str().unwrap())
        .collect();
    assert_eq!(methods, ["sampling/createMessage"]);
    // Elicitation declared: form mode only.
    let r = call(
        a,
        12,
        "create_repo",
        json!({"repo": "x"}),
        json!({"elicitation": {}}),
        None,
        json!({}),
    );
    assert_eq!(
        r.result()["inputRequests"]["github_login"]["params"]["mode"],
        "form"
    );
}

fn accept(content: Value) -> Value {
    json!({"action": "accept", "content": content})
}

#[test]
fn b11_b12_elicitation_round_trip() {
    let p = pool();
    let a = p.addrs()[0];
    let caps = json!({"elicitation": {}});
    let r = call(
        a,
        1,
        "test_input_required_result_elicitation",
        json!({}),
        caps.clone(),
        None,
        json!({}),
    );
    let res = r.result();
    assert_eq!(res["resultType"], "input_required");
    let req = &res["inputRequests"]["user_name"];
    assert_eq!(req["method"], "elicitation/create");
    assert!(req.get("jsonrpc").is_none() && req.get("id").is_none());
    assert!(req["params"]["requestedSchema"].is_object());
    assert!(res.get("ttlMs").is_none() && res.get("cacheScope").is_none());
    let state = res["requestState"].as_str().unwrap().to_owned(); // B27
    let r = call(
        a,
        2,
        "test_input_required_result_elicitation",
        json!({}),
        caps,
        None,
        json!({"inputResponses": {"user_name": accept(json!({"name": "Alice"}))}, "requestState": state}),
    );
    let res = r.result();
    assert_eq!(res["resultType"], "complete");
    assert_eq!(first_text(&res), "Hello, Alice!");
}

#[test]
fn b13_sampling_and_roots() {
    let p = pool();
    let a = p.addrs()[0];
    let caps = json!({"sampling": {}, "roots": {}});
    let r = call(
        a,
        1,
        "summarize",
        json!({"text": "a long text"}),
        caps.clone(),
        None,
        json!({}),
    );
    let res = r.result();
    assert_eq!(
        res["inputRequests"]["summary"]["method"],
        "sampling/createMessage"
    );
    assert!(res["inputRequests"]["summary"]["params"]["maxTokens"]
        .as_u64()
        .is_some());
    let answer =
        json!({"role": "assistant", "content": {"type": "text", "text": "Short."}, "model": "m"});
    let r = call(
        a,
        2,
        "summarize",
        json!({"text": "a long text"}),
        caps.clone(),
        None,
        json!({"inputResponses": {"summary": answer}, "requestState": res["requestState"]}),
    );
    assert_eq!(first_text(&r.result()), "Short.");

    let r = call(
        a,
        3,
        "list_workspace",
        json!({}),
        caps.clone(),
        None,
        json!({}),
    );
    let res = r.result();
    assert_eq!(res["inputRequests"]["roots"]["method"], "roots/list");
    let roots =
        json!({"roots": [{"uri": "file:///src/app"}, {"uri": "file:///src/lib", "name": "lib"}]});
    let r = call(
        a,
        4,
        "list_workspace",
        json!({}),
        caps,
        None,
        json!({"inputResponses": {"roots": roots}, "requestState": res["requestState"]}),
    );
    assert_eq!(
        first_text(&r.result()),
        "Workspace roots:\n- file:///src/app\n- file:///src/lib"
    );
}

#[test]
fn b14_multiple_requests_and_b16_b17_missing_and_extra_answers() {
    let p = pool();
    let a = p.addrs()[0];
    let caps = json!({"elicitation": {}, "sampling": {}, "roots": {}});
    let tool = "test_input_required_result_multiple_inputs";
    let res = call(a, 1, tool, json!({}), caps.clone(), None, json!({})).result();
    let mut keys: Vec<&String> = res["inputRequests"].as_object().unwrap().keys().collect();
    keys.sort();
    assert_eq!(keys, ["client_roots", "greeting", "user_name"]);
    let all = json!({
        "user_name": accept(json!({"name": "Al"})),
        "greeting": {"role": "assistant", "content": {"type": "text", "text": "Hi"}, "model": "m"},
        "client_roots": {"roots": [{"uri": "file:///r"}]},
    });
    // B16: only one answer → a new input_required for the two missing ones, not an error.
    let r = call(
        a,
        2,
        tool,
        json!({}),
        caps.clone(),
        None,
        json!({"inputResponses": {"user_name": all["user_name"]}, "requestState": res["requestState"]}),
    );
    let again = r.result();
    assert_eq!(again["resultType"], "input_required");
    assert_eq!(again["inputRequests"].as_object().unwrap().len(), 2);
    // B16 with a wrong key only.
    let r = call(
        a,
        3,
        "create_repo",
        json!({"repo": "x"}),
        caps.clone(),
        None,
        json!({}),
    );
    let st = r.result()["requestState"].clone();
    let r = call(
        a,
        4,
        "create_repo",
        json!({"repo": "x"}),
        caps.clone(),
        None,
        json!({"inputResponses": {"wrong_key": accept(json!({}))}, "requestState": st}),
    );
    assert_eq!(r.result()["resultType"], "input_required");
    assert!(r.result()["inputRequests"]["github_login"].is_object());
    // B17: all answers plus extras → complete.
    let mut with_extra = all.clone();
    with_extra["unknown_extra"] = accept(json!({"foo": 1}));
    let r = call(
        a,
        5,
        tool,
        json!({}),
        caps,
        None,
        json!({"inputResponses": with_extra, "requestState": res["requestState"]}),
    );
    assert_eq!(r.result()["resultType"], "complete");
}

#[test]
fn b15_multi_round() {
    let p = pool();
    let a = p.addrs()[0];
    let caps = json!({"elicitation": {}});
    let t = "test_input_required_result_multi_round";
    let r1 = call(a, 1, t, json!({}), caps.clone(), None, json!({})).result();
    assert!(r1["inputRequests"]["step1"].is_object());
    let r2 = call(a, 2, t, json!({}), caps.clone(), None, json!({"inputResponses": {"step1": accept(json!({"name": "Alice"}))}, "requestState": r1["requestState"]})).result();
    assert_eq!(r2["resultType"], "input_required");
    assert!(r2["inputRequests"]["step2"].is_object());
    assert_ne!(r2["requestState"], r1["requestState"]);
    let r3 = call(a, 3, t, json!({}), caps, None, json!({"inputResponses": {"step2": accept(json!({"color": "blue"}))}, "requestState": r2["requestState"]})).result();
    assert_eq!(first_text(&r3), "Alice's favorite color is blue");
}

#[test]
fn b18_malformed_answers_and_b19_tampered_state() {
    let p = pool();
    let a = p.addrs()[0];
    let caps = json!({"elicitation": {}});
    let t = "test_input_required_result_elicitation";
    for bad in [
        json!({"user_name": 12345}),
        Value::Null,
        json!([1]),
        json!({"user_name": {"action": "maybe"}}),
    ] {
        let r = call(
            a,
            1,
            t,
            json!({}),
            caps.clone(),
            None,
            json!({"inputResponses": bad}),
        );
        assert_eq!(r.status, 200);
        assert_eq!(r.code(), Some(-32602), "{bad}: {}", r.text());
    }
    let st = call(
        a,
        2,
        "test_input_required_result_tampered_state",
        json!({}),
        caps.clone(),
        None,
        json!({}),
    )
    .result()["requestState"]
        .as_str()
        .unwrap()
        .to_owned();
    for tampered in [
        format!("{st}-TAMPERED"),
        format!("x{st}"),
        st[..st.len() - 4].to_string(),
        "".into(),
    ] {
        let r = call(
            a,
            3,
            "test_input_required_result_tampered_state",
            json!({}),
            caps.clone(),
            None,
            json!({"inputResponses": {"confirm": accept(json!({"ok": true}))}, "requestState": tampered}),
        );
        assert_eq!(r.code(), Some(-32602), "{}", r.text());
        assert_eq!(r.json()["id"], 3);
    }
    let r = call(
        a,
        4,
        "create_repo",
        json!({"repo": "x"}),
        caps,
        None,
        json!({"requestState": 42}),
    );
    assert_eq!(r.code(), Some(-32602));
}

#[test]
fn b20_expired_state() {
    let p = Pool::start(PoolOptions::local(1).with_ttl(Duration::from_millis(300))).unwrap();
    let a = p.addrs()[0];
    let caps = json!({"elicitation": {}});
    let st = call(
        a,
        1,
        "create_repo",
        json!({"repo": "x"}),
        caps.clone(),
        None,
        json!({}),
    )
    .result()["requestState"]
        .clone();
    std::thread::sleep(Duration::from_millis(600));
    let r = call(
        a,
        2,
        "create_repo",
        json!({"repo": "x"}),
        caps,
        None,
        json!({"inputResponses": {"github_login": accept(json!({"name": "octocat"}))}, "requestState": st}),
    );
    assert_eq!(r.code(), Some(-32602), "{}", r.text());
    assert!(r.json()["error"]["message"]
        .as_str()
        .unwrap()
        .contains("expired"));
}

#[test]
fn b21_b22_state_bound_to_principal_and_request() {
    let p = pool();
    let a = p.addrs()[0];
    let caps = json!({"elicitation": {}});
    let env = |e: &str| json!({"service": "billing", "environment": e});
    let st = call_deploy(a, 1, env("staging"), &caps, Some("alice"), json!({})).result()
        ["requestState"]
        .clone();
    let answer = json!({"confirm": accept(json!({"confirmation": "billing"}))});
    let with = |s: &Value| json!({"inputResponses": answer, "requestState": s});
    // B21: bob presents alice's state; anonymous too.
    for user in [Some("bob"), None] {
        let r = call_deploy(a, 2, env("staging"), &caps, user, with(&st));
        assert_eq!(r.code(), Some(-32602), "{user:?}: {}", r.text());
    }
    // B22: other arguments, other tool.
    let r = call_deploy(
        a,
        3,
        json!({"service": "payroll", "environment": "staging"}),
        &caps,
        Some("alice"),
        with(&st),
    );
    assert_eq!((r.status, r.code()), (200, Some(-32602)), "{}", r.text());
    let r = call(
        a,
        4,
        "create_repo",
        json!({"repo": "billing"}),
        caps.clone(),
        Some("alice"),
        with(&st),
    );
    assert_eq!(r.code(), Some(-32602), "{}", r.text());
    // The sealed environment cannot be swapped.
    let r = call_deploy(a, 5, env("production"), &caps, Some("alice"), with(&st));
    assert_eq!(r.code(), Some(-32602), "{}", r.text());
    assert!(
        r.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("environment"),
        "{}",
        r.text()
    );
    // The rightful owner completes.
    let r = call_deploy(a, 6, env("staging"), &caps, Some("alice"), with(&st));
    assert_eq!(first_text(&r.result()), "Deployed billing to staging");
}

/// deploy with the Mcp-Param-Environment header it needs.
fn call_deploy(
    a: std::net::SocketAddr,
    id: i64,
    args: Value,
    caps: &Value,
    user: Option<&str>,
    extra: Value,
) -> Reply {
    let mut params = json!({"name": "deploy", "arguments": args, "_meta": meta(caps.clone())});
    for (k, v) in extra.as_object().unwrap() {
        params[k] = v.clone();
    }
    let env = args["environment"].as_str().unwrap().to_owned();
    let auth = user.map(|u| format!("Bearer {u}"));
    let mut h = vec![("Mcp-Param-Environment", env.as_str())];
    if let Some(a) = &auth {
        h.push(("Authorization", a));
    }
    rpc(a, json!(id), "tools/call", params, &h)
}

#[test]
fn b25_prompt_input_required() {
    let p = pool();
    let a = p.addrs()[0];
    let params = json!({"name": "test_input_required_result_prompt", "_meta": meta(json!({"elicitation": {}}))});
    let r1 = rpc(a, json!(1), "prompts/get", params.clone(), &[]).result();
    assert_eq!(r1["resultType"], "input_required");
    let mut p2 = params;
    p2["inputResponses"] = json!({"user_context": accept(json!({"context": "ctx"}))});
    p2["requestState"] = r1["requestState"].clone();
    let r2 = rpc(a, json!(2), "prompts/get", p2, &[]).result();
    assert_eq!(r2["resultType"], "complete");
    assert!(r2["messages"][0]["content"]["text"]
        .as_str()
        .unwrap()
        .contains("ctx"));
}

#[test]
fn b30_b31_unknown_resource_tool_and_failing_tool() {
    let p = pool();
    let a = p.addrs()[0];
    let r = rpc(
        a,
        json!(1),
        "resources/read",
        json!({"uri": "test://nonexistent"}),
        &[],
    );
    assert_eq!((r.status, r.code()), (200, Some(-32602)));
    assert_eq!(r.json()["error"]["data"]["uri"], "test://nonexistent");
    let r = call(a, 2, "no_such_tool", json!({}), json!({}), None, json!({}));
    assert_eq!((r.status, r.code()), (200, Some(-32602)));
    let res = call(
        a,
        3,
        "test_error_handling",
        json!({}),
        json!({}),
        None,
        json!({}),
    )
    .result();
    assert_eq!(
        (res["resultType"].as_str(), res["isError"].as_bool()),
        (Some("complete"), Some(true))
    );
    let r = call(
        a,
        4,
        "create_repo",
        json!({"repo": 5}),
        json!({"elicitation": {}}),
        None,
        json!({}),
    );
    assert_eq!(r.code(), Some(-32602), "bad argument type");
}

#[test]
fn b32_progress_over_sse() {
    let p = pool();
    let a = p.addrs()[0];
    let mut m = meta(json!({}));
    m["progressToken"] = json!("tok-1");
    let r = rpc(
        a,
        json!(9),
        "tools/call",
        json!({"name": "test_tool_with_progress", "arguments": {}, "_meta": m}),
        &[],
    );
    assert_eq!(r.header("content-type"), Some("text/event-stream"));
    let msgs = r.sse_messages();
    let progress: Vec<f64> = msgs
        .iter()
        .filter(|m| m["method"] == "notifications/progress")
        .map(|m| {
            assert_eq!(m["params"]["progressToken"], "tok-1");
            m["params"]["progress"].as_f64().unwrap()
        })
        .collect();
    assert_eq!(progress, [0.0, 50.0, 100.0]);
    assert!(msgs.iter().all(|m| m
        .get("method")
        .is_none_or(|x| x.as_str().unwrap().starts_with("notifications/"))));
    assert!(
        msgs.iter().all(|m| m["method"] != "notifications/message"),
        "no log without logLevel"
    );
    assert_eq!(msgs.last().unwrap()["id"], 9);
    assert_eq!(msgs.last().unwrap()["result"]["resultType"], "complete");
}

#[test]
fn b33_b34_notifications_and_other_http_methods() {
    let p = pool();
    let a = p.addrs()[0];
    let r = post(
        a,
        &[("Content-Type", "application/json")],
        r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{}}"#,
    );
    assert_eq!(r.status, 202);
    assert!(r.body.is_empty());
    for m in ["GET", "DELETE", "PUT"] {
        let r = request(a, m, "/mcp", &[("Mcp-Session-Id", "abc")], b"");
        assert_eq!(r.status, 405, "{m}");
        assert_eq!(r.header("allow"), Some("POST"), "{m}");
        assert!(r.header("mcp-session-id").is_none());
    }
    assert_eq!(request(a, "POST", "/other", &[], b"{}").status, 404);
}

#[test]
fn b35_b36_listen_stream_acknowledges_notifies_and_ends_on_shutdown() {
    let p = pool();
    let a = p.addrs()[0];
    let h = good_headers("subscriptions/listen", None);
    let body = json!({"jsonrpc": "2.0", "id": "sub-1", "method": "subscriptions/listen",
        "params": {"notifications": {"toolsListChanged": true}, "_meta": meta(json!({}))}});
    let mut s = SseStream::open(a, &hdrs(&h), &body.to_string());
    assert_eq!(s.status, 200);
    let ack = s.next_message().unwrap();
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged");
    assert_eq!(
        ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        "sub-1"
    );
    assert_eq!(
        ack["params"]["notifications"],
        json!({"toolsListChanged": true})
    );
    // A prompt change is not sent (not requested); a tool change is.
    call(
        a,
        1,
        "test_trigger_prompt_change",
        json!({}),
        json!({}),
        None,
        json!({}),
    )
    .result();
    call(
        a,
        2,
        "test_trigger_tool_change",
        json!({}),
        json!({}),
        None,
        json!({}),
    )
    .result();
    let n = s.next_message().unwrap();
    assert_eq!(n["method"], "notifications/tools/list_changed");
    assert_eq!(
        n["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        "sub-1"
    );
    p.shutdown();
    let end = s.next_message().unwrap();
    assert_eq!(end["id"], "sub-1");
    assert_eq!(end["result"]["resultType"], "complete");
    assert_eq!(
        end["result"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        "sub-1"
    );
    assert!(
        s.next_message().is_none(),
        "the stream closes after the final result"
    );
}

/// B38: header validation cases G2–G15 and G34, table-driven.
#[test]
fn b38_header_validation() {
    let p = pool();
    let a = p.addrs()[0];
    let body = |name: &str| {
        format!(
            r#"{{"jsonrpc":"2.0","id":"c-1","method":"tools/call","params":{{"name":"{name}","arguments":{{}},"_meta":{META_OK}}}}}"#
        )
    };
    let base = [
        ("Content-Type", "application/json"),
        ("MCP-Protocol-Version", "2026-07-28"),
    ];
    type Case<'a> = (&'a str, Vec<(&'a str, &'a str)>, String, u16, Option<i64>);
    let cases: Vec<Case> = vec![
        (
            "good",
            vec![
                ("Mcp-Method", "tools/call"),
                ("Mcp-Name", "test_simple_text"),
            ],
            body("test_simple_text"),
            200,
            None,
        ),
        (
            "G2 no Mcp-Method",
            vec![("Mcp-Name", "test_simple_text")],
            body("test_simple_text"),
            400,
            Some(-32020),
        ),
        (
            "G3 other method",
            vec![
                ("Mcp-Method", "prompts/get"),
                ("Mcp-Name", "test_simple_text"),
            ],
            body("test_simple_text"),
            400,
            Some(-32020),
        ),
        (
            "G4 case",
            vec![
                ("Mcp-Method", "TOOLS/CALL"),
                ("Mcp-Name", "test_simple_text"),
            ],
            body("test_simple_text"),
            400,
            Some(-32020),
        ),
        (
            "G5 lowercase name",
            vec![
                ("mcp-method", "tools/call"),
                ("MCP-NAME", "test_simple_text"),
            ],
            body("test_simple_text"),
            200,
            None,
        ),
        (
            "G6 no Mcp-Name",
            vec![("Mcp-Method", "tools/call")],
            body("test_simple_text"),
            400,
            Some(-32020),
        ),
        (
            "G7 other name",
            vec![("Mcp-Method", "tools/call"), ("Mcp-Name", "echo")],
            body("test_simple_text"),
            400,
            Some(-32020),
        ),
        (
            "G8 whitespace",
            vec![
                ("Mcp-Method", "tools/call"),
                ("Mcp-Name", "   test_simple_text   "),
            ],
            body("test_simple_text"),
            200,
            None,
        ),
        (
            "G11 base64",
            vec![
                ("Mcp-Method", "tools/call"),
                ("Mcp-Name", "=?base64?dGVzdF9zaW1wbGVfdGV4dA==?="),
            ],
            body("test_simple_text"),
            200,
            None,
        ),
        (
            "G12 bad base64",
            vec![
                ("Mcp-Method", "tools/call"),
                ("Mcp-Name", "=?base64?dGVzdF9zaW1wbGVfdGV4dA?="),
            ],
            body("test_simple_text"),
            400,
            Some(-32020),
        ),
        (
            "G13 uppercase sentinel",
            vec![
                ("Mcp-Method", "tools/call"),
                ("Mcp-Name", "=?BASE64?dGVzdF9zaW1wbGVfdGV4dA==?="),
            ],
            body("test_simple_text"),
            400,
            Some(-32020),
        ),
        (
            "G11 unknown non-ASCII tool",
            vec![
                ("Mcp-Method", "tools/call"),
                ("Mcp-Name", "=?base64?bcOpdMOpbw==?="),
            ],
            body("météo"),
            200,
            Some(-32602),
        ),
    ];
    for (what, extra, b, status, code) in cases {
        let mut h: Vec<(&str, &str)> = base.to_vec();
        h.extend(extra);
        let r = post(a, &h, &b);
        assert_eq!((r.status, r.code()), (status, code), "{what}: {}", r.text());
        assert_eq!(r.json()["id"], "c-1", "{what}");
    }
    // G14: no MCP-Protocol-Version; G15: header and body versions differ.
    let r = post(
        a,
        &[
            ("Content-Type", "application/json"),
            ("Mcp-Method", "tools/call"),
            ("Mcp-Name", "test_simple_text"),
        ],
        &body("test_simple_text"),
    );
    assert_eq!((r.status, r.code()), (400, Some(-32020)));
    let old = body("test_simple_text").replace("\"2026-07-28\"", "\"2025-11-25\"");
    let r = post(
        a,
        &[
            base[0],
            base[1],
            ("Mcp-Method", "tools/call"),
            ("Mcp-Name", "test_simple_text"),
        ],
        &old,
    );
    assert_eq!((r.status, r.code()), (400, Some(-32020)));
    // G9: resources/read Mcp-Name is the uri.
    let r = rpc(
        a,
        json!(1),
        "resources/read",
        json!({"uri": "test://static-text"}),
        &[("Mcp-Name", "test://static-binary")],
    );
    assert_eq!((r.status, r.code()), (400, Some(-32020)));
    // G10: prompts/get.
    let r = rpc(
        a,
        json!(2),
        "prompts/get",
        json!({"name": "test_simple_prompt"}),
        &[("Mcp-Name", "other")],
    );
    assert_eq!((r.status, r.code()), (400, Some(-32020)));
    // G34: Mcp-Param-Environment for deploy.
    let caps = json!({"elicitation": {}});
    let args = json!({"service": "s", "environment": "prod"});
    let deploy = |id: i64, extra: &[(&str, &str)]| {
        rpc(
            a,
            json!(id),
            "tools/call",
            json!({"name": "deploy", "arguments": args, "_meta": meta(caps.clone())}),
            extra,
        )
    };
    assert_eq!(
        (deploy(3, &[]).status, deploy(3, &[]).code()),
        (400, Some(-32020)),
        "missing Mcp-Param-Environment"
    );
    let r = deploy(4, &[("Mcp-Param-Environment", "staging")]);
    assert_eq!((r.status, r.code()), (400, Some(-32020)), "mismatch");
    let r = deploy(5, &[("Mcp-Param-Environment", "=?base64?!!?=")]);
    assert_eq!((r.status, r.code()), (400, Some(-32020)), "bad base64");
    assert_eq!(
        deploy(6, &[("mcp-param-environment", " prod ")]).result()["resultType"],
        "input_required"
    );
    assert_eq!(
        deploy(7, &[("Mcp-Param-Environment", "=?base64?cHJvZA==?=")]).result()["resultType"],
        "input_required"
    );
}

#[test]
fn transport_rejections() {
    let p = pool();
    let a = p.addrs()[0];
    let good = good_headers("server/discover", None);
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{{"_meta":{META_OK}}}}}"#
    );
    let with = |extra: &[(&'static str, &'static str)]| {
        let mut h: Vec<(String, String)> = good.clone();
        for (k, v) in extra {
            h.retain(|(hk, _)| !hk.eq_ignore_ascii_case(k));
            h.push((k.to_string(), v.to_string()));
        }
        post(a, &hdrs(&h), &body)
    };
    assert_eq!(with(&[("Origin", "https://evil.example")]).status, 403);
    assert_eq!(with(&[("Origin", "http://localhost:3000")]).status, 200);
    assert_eq!(
        with(&[
            ("Host", "evil.example.com"),
            ("Origin", "http://evil.example.com")
        ])
        .status,
        403
    );
    assert_eq!(
        with(&[("Host", "evil.example.com")]).status,
        403,
        "DNS rebinding: Host alone"
    );
    assert_eq!(with(&[("Host", "localhost:1234")]).status, 200);
    let r = with(&[("Content-Type", "text/plain")]);
    assert_eq!(r.status, 415);
    assert!(r.json()["error"]["code"].is_i64());
    assert_eq!(
        with(&[("Content-Type", "application/json; charset=utf-8")]).status,
        200
    );
    // Parse errors, batches, responses.
    let h = hdrs(&good);
    for (b, code) in [
        ("{not json", -32700),
        ("[1,2]", -32600),
        (r#"{"jsonrpc":"2.0","id":1,"result":{}}"#, -32600),
        ("", -32700),
    ] {
        let r = post(a, &h, b);
        assert_eq!((r.status, r.code()), (400, Some(code)), "{b}");
    }
    // Too large, by Content-Length and by a chunked body (a pool with a 1 KiB limit).
    let small = Pool::start(PoolOptions {
        body_limit: 1024,
        ..PoolOptions::local(1)
    })
    .unwrap();
    let sa = small.addrs()[0];
    let big = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"echo","arguments":{{"text":"{}"}}}}}}"#,
        "a".repeat(2000)
    );
    let r = post(sa, &h, &big);
    assert_eq!(r.status, 413);
    assert!(r.json()["error"]["message"]
        .as_str()
        .unwrap()
        .contains("too large"));
    let chunked = format!(
        "POST /mcp HTTP/1.1\r\nHost: {sa}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n{:x}\r\n{big}\r\n0\r\n\r\n",
        big.len()
    );
    assert_eq!(raw(sa, chunked.as_bytes()).status, 413);
    assert_eq!(post(sa, &h, &body).status, 200, "small bodies still pass");
    // Garbage on the socket does not take the server down.
    let r = raw(a, b"\x00\x01garbage\r\n\r\n");
    assert!(r.status >= 400);
    assert_eq!(with(&[]).status, 200, "still serving");
}
