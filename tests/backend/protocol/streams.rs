//! Unknown and failing tools, progress over SSE, notifications, other HTTP methods, the listen stream.

use super::*;

#[test]
fn unknown_resource_tool_and_failing_tool() {
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
fn progress_over_sse() {
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
fn notifications_and_other_http_methods() {
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
fn listen_stream_acknowledges_notifies_and_ends_on_shutdown() {
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

/// `resourceSubscriptions`: the resources the server has are honoured (the acknowledgement
/// says which); a charge made on another instance of the pool announces `charges://<cart>`
/// once, and replaying its confirmation announces nothing.
#[test]
fn listen_stream_carries_updates_of_the_resources_subscribed() {
    let p = mcp_edge::backend::Pool::start(mcp_edge::backend::PoolOptions::local(2)).unwrap();
    let a = p.addrs();
    let h = good_headers("subscriptions/listen", None);
    let asked = json!({"toolsListChanged": true,
        "resourceSubscriptions": ["charges://cart-s", "nothing://here", 7]});
    let body = json!({"jsonrpc": "2.0", "id": 4, "method": "subscriptions/listen",
        "params": {"notifications": asked, "_meta": meta(json!({}))}});
    let mut s = SseStream::open(a[0], &hdrs(&h), &body.to_string());
    assert_eq!(s.status, 200);
    let ack = s.next_message().unwrap();
    assert_eq!(
        ack["params"]["notifications"],
        json!({"toolsListChanged": true, "resourceSubscriptions": ["charges://cart-s"]})
    );
    let charge = |id: i64, cart: &str, extra: Value| {
        let args = json!({"cart_id": cart, "amount": 3});
        let caps = json!({"elicitation": {}});
        call(a[1], id, "charge", args, caps, None, extra).result()
    };
    let yes = |st: &Value| json!({"inputResponses": {"confirm_charge": {"action": "accept", "content": {"confirm": true}}}, "requestState": st});
    // Another cart's charge is not announced here; this cart's is, with its URI.
    let other = charge(1, "cart-o", json!({}));
    charge(2, "cart-o", yes(&other["requestState"]));
    let first = charge(3, "cart-s", json!({}));
    let done = charge(4, "cart-s", yes(&first["requestState"]));
    assert_eq!(done["structuredContent"]["alreadyCharged"], false, "{done}");
    let n = s.next_message().unwrap();
    assert_eq!(n["method"], "notifications/resources/updated", "{n}");
    assert_eq!(n["params"]["uri"], "charges://cart-s", "{n}");
    assert_eq!(
        n["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        4
    );
    // A replayed confirmation charges nothing, so nothing is announced: the next message is
    // the tool change that follows it.
    charge(5, "cart-s", yes(&first["requestState"]));
    let trigger = json!({});
    call(
        a[1],
        6,
        "test_trigger_tool_change",
        trigger,
        json!({}),
        None,
        json!({}),
    )
    .result();
    let n = s.next_message().unwrap();
    assert_eq!(n["method"], "notifications/tools/list_changed", "{n}");
}
