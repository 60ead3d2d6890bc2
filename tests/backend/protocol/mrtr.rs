//! Multi round-trip requests (the server's MRTR conformance cases): elicitation, sampling, roots,
//! several and missing answers, tampered, expired and foreign state, prompts.

use super::*;

fn accept(content: Value) -> Value {
    json!({"action": "accept", "content": content})
}

#[test]
fn elicitation_round_trip() {
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
    // Every input_required carries a state.
    let state = res["requestState"].as_str().unwrap().to_owned();
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
fn sampling_and_roots() {
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
fn multiple_requests_and_missing_and_extra_answers() {
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
    // Only one answer → a new input_required for the two missing ones, not an error.
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
    // A wrong key only: asked again, too.
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
    // All answers plus extras → complete.
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
fn multi_round() {
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
fn malformed_answers_and_tampered_state() {
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
fn expired_state() {
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
fn state_bound_to_principal_and_request() {
    let p = pool();
    let a = p.addrs()[0];
    let caps = json!({"elicitation": {}});
    let env = |e: &str| json!({"service": "billing", "environment": e});
    let st = call_deploy(a, 1, env("staging"), &caps, Some("alice"), json!({})).result()
        ["requestState"]
        .clone();
    let answer = json!({"confirm": accept(json!({"confirmation": "billing"}))});
    let with = |s: &Value| json!({"inputResponses": answer, "requestState": s});
    // Bob presents alice's state; anonymous too.
    for user in [Some("bob"), None] {
        let r = call_deploy(a, 2, env("staging"), &caps, user, with(&st));
        assert_eq!(r.code(), Some(-32602), "{user:?}: {}", r.text());
    }
    // Other arguments, other tool.
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
fn prompt_input_required() {
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
