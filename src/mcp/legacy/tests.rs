//! Unit tests of the era translations: a head's era, a legacy call as a 2026 call, a listen
//! stream as a standalone stream and a server's list change as a listen notification, the
//! negotiated revision, results and discovery.

use super::*;
use http::{HeaderMap, HeaderValue, Method};

#[test]
fn a_listen_stream_becomes_a_standalone_stream_of_list_changes() {
    let ack = json!({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged", "params": {"_meta": {meta::SUBSCRIPTION_ID: 1}}});
    assert_eq!(to_standalone(ack), None);
    let changed = json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed", "params": {"_meta": {meta::SUBSCRIPTION_ID: 1}}});
    assert_eq!(
        to_standalone(changed),
        Some(json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed", "params": {}}))
    );
    let updated = json!({"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": "file:///a", "_meta": {meta::SUBSCRIPTION_ID: 1, "x": 2}}});
    assert_eq!(
        to_standalone(updated).unwrap()["params"],
        json!({"uri": "file:///a", "_meta": {"x": 2}})
    );
    let log = json!({"jsonrpc": "2.0", "method": "notifications/message", "params": {}});
    assert_eq!(to_standalone(log), None);
    let done = json!({"jsonrpc": "2.0", "id": 1, "result": {"resultType": "complete"}});
    assert_eq!(to_standalone(done), None);
}

fn head(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
    let mut h = HeaderMap::new();
    for (k, v) in pairs {
        h.insert(*k, HeaderValue::from_static(v));
    }
    h
}

#[test]
fn the_head_tells_the_era_or_says_it_cannot() {
    let post = Method::POST;
    assert_eq!(
        era_of(&post, &head(&[("mcp-session-id", "x")])),
        Era::Legacy
    );
    assert_eq!(
        era_of(&Method::GET, &head(&[("mcp-session-id", "x")])),
        Era::Legacy
    );
    assert_eq!(era_of(&Method::GET, &head(&[])), Era::Modern);
    assert_eq!(
        era_of(&post, &head(&[("mcp-protocol-version", " 2025-06-18")])),
        Era::Legacy
    );
    assert_eq!(
        era_of(&post, &head(&[("mcp-protocol-version", "2026-07-28")])),
        Era::Modern
    );
    assert_eq!(
        era_of(&post, &head(&[("mcp-method", "tools/list")])),
        Era::Modern
    );
    assert_eq!(era_of(&post, &head(&[])), Era::Unsure);
    // A stray session id on a 2026 request is ignored, as a 2026 server ignores it.
    let stray = [("mcp-session-id", "x"), ("mcp-method", "tools/list")];
    assert_eq!(era_of(&post, &head(&stray)), Era::Modern);
    // Some 2025-era clients send Mcp-Method too: the version they claim decides.
    let both = [
        ("mcp-method", "initialize"),
        ("mcp-protocol-version", "2025-11-25"),
    ];
    assert_eq!(era_of(&post, &head(&both)), Era::Legacy);
    // ...and before a version is known, `initialize` (which 2026 does not have) says it.
    let first = [("mcp-method", "initialize")];
    assert_eq!(era_of(&post, &head(&first)), Era::Legacy);
    let padded = [("mcp-method", " initialize ")];
    assert_eq!(era_of(&post, &head(&padded)), Era::Legacy);
    assert_eq!(era_of(&Method::GET, &head(&first)), Era::Modern);
    // A 2026 client naming the removed method gets the 2026 answer (404, -32601).
    let modern = [
        ("mcp-method", "initialize"),
        ("mcp-protocol-version", "2026-07-28"),
    ];
    assert_eq!(era_of(&post, &head(&modern)), Era::Modern);
}

#[test]
fn a_servers_list_change_reaches_a_2026_listener_that_asked_for_it() {
    let params = json!({"notifications": {"toolsListChanged": true, "promptsListChanged": false}});
    let wants = listen_wants(params.as_object().unwrap());
    assert_eq!(wants, [true, false, false]);
    let ack = listen_ack(wants, &json!(7));
    assert_eq!(
        ack["params"]["notifications"],
        json!({"toolsListChanged": true})
    );
    assert_eq!(ack["params"]["_meta"][meta::SUBSCRIPTION_ID], 7);
    let tools = json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"});
    let n = to_listen(&tools, wants, &json!(7)).unwrap();
    assert_eq!(n["params"]["_meta"][meta::SUBSCRIPTION_ID], 7);
    let prompts = json!({"jsonrpc": "2.0", "method": "notifications/prompts/list_changed"});
    assert_eq!(to_listen(&prompts, wants, &json!(7)), None);
    let log = json!({"jsonrpc": "2.0", "method": "notifications/message", "params": {}});
    assert_eq!(to_listen(&log, wants, &json!(7)), None);
}

#[test]
fn a_legacy_call_becomes_a_2026_call_with_the_sessions_meta() {
    let params = json!({"name": "echo", "arguments": {"a": 1}, "_meta": {"progressToken": 5}});
    let caps = json!({"elicitation": {}});
    let body = to_modern(
        "tools/call",
        Some(&params),
        9,
        &caps,
        &json!({"name": "c"}),
        Some("debug"),
    );
    let v: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(v["id"], 9);
    assert_eq!(v["params"]["arguments"]["a"], 1);
    let m = &v["params"]["_meta"];
    assert_eq!(m["progressToken"], 5);
    assert_eq!(m[meta::PROTOCOL_VERSION], PROTOCOL_VERSION);
    assert_eq!(m[meta::CLIENT_CAPABILITIES], caps);
    assert_eq!(m[meta::LOG_LEVEL], "debug");
    assert_eq!(
        name_of("tools/call", Some(&params)).as_deref(),
        Some("echo")
    );
    assert_eq!(name_of("tools/list", Some(&params)), None);
}

#[test]
fn versions_negotiate_to_a_bridged_one() {
    assert_eq!(negotiate(Some("2025-06-18")), "2025-06-18");
    assert_eq!(negotiate(Some("2024-11-05")), "2025-11-25");
    assert_eq!(negotiate(None), "2025-11-25");
}

#[test]
fn results_lose_their_2026_members_and_discover_becomes_initialize() {
    let r = to_legacy_result(json!({"resultType": "complete", "ttlMs": 0, "tools": []}));
    assert_eq!(r, json!({"tools": []}));
    let d = json!({"resultType": "complete", "supportedVersions": ["2026-07-28"],
        "capabilities": {"tools": {}}, "instructions": "hi",
        "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "b", "version": "1"}}});
    let i = initialize_result("2025-11-25", &d);
    assert_eq!(i["serverInfo"]["name"], "b");
    assert_eq!(i["capabilities"], json!({"tools": {}}));
    assert_eq!(i["instructions"], "hi");
    assert!(declared(&json!({"sampling": {}}), "sampling/createMessage"));
    assert!(!declared(&json!({}), "roots/list"));
}

#[test]
fn a_2026_server_refuses_removed_methods_and_other_versions_itself() {
    for m in REMOVED_IN_2026 {
        let r = refused_as_2026(m, Some("2026-07-28")).unwrap();
        assert_eq!((r.status, r.code), (404, -32601), "{m}");
    }
    let r = refused_as_2026("tools/call", Some("2099-01-01")).unwrap();
    assert_eq!((r.status, r.code), (400, -32022));
    assert_eq!(r.data.unwrap()["supported"], json!(["2026-07-28"]));
    assert!(refused_as_2026("tools/call", Some("2026-07-28")).is_none());
    assert!(refused_as_2026("tools/list", None).is_none());
    let not_found = json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32601, "message": "x"}});
    assert_eq!(status_of(&not_found), 404);
    assert_eq!(
        status_of(&json!({"jsonrpc": "2.0", "id": 1, "result": {}})),
        200
    );
}

#[test]
fn a_missing_capability_error_tells_a_legacy_client_to_declare_it_at_initialize() {
    let mut e = json!({"code": -32021, "message": "declare it in params._meta",
        "data": {"requiredCapabilities": {"elicitation": {}}}});
    to_legacy_error(&mut e);
    let m = e["message"].as_str().unwrap();
    assert!(
        m.contains("capability elicitation") && m.contains("initialize"),
        "{m}"
    );
    assert_eq!(e["data"]["requiredCapabilities"]["elicitation"], json!({}));
    let mut other = json!({"code": -32602, "message": "bad params"});
    to_legacy_error(&mut other);
    assert_eq!(other["message"], "bad params");
}
