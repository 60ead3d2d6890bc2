//! A 2025-era client written by hand over raw sockets (the session's `initialize`, requests on
//! it, from a chosen loopback address), for what the SDK clients cannot show: a leg's progress
//! reaching the client while the leg runs, the standalone stream's list changes and its bound
//! (`legacy.max_streams`), and the console's eras.

use serde_json::{json, Value};
use std::net::{IpAddr, SocketAddr};
use std::time::Instant;

use super::{backend, gateway};
use crate::support::http::{post_from, Reply, SseStream};
use crate::support::{sample, scrape};

pub(super) const JSON: (&str, &str) = ("Content-Type", "application/json");
pub(super) const ACCEPT: (&str, &str) = ("Accept", "application/json, text/event-stream");

/// `initialize` with `auth` (an Authorization value): the session id.
pub(super) fn open(gw: SocketAddr, auth: Option<&str>) -> String {
    open_from(LOCAL, gw, auth)
}

pub(super) const LOCAL: IpAddr = IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);

pub(super) fn open_from(from: IpAddr, gw: SocketAddr, auth: Option<&str>) -> String {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {"elicitation": {}}, "clientInfo": {"name": "raw", "version": "1"}}});
    let mut h = vec![JSON, ACCEPT];
    if let Some(a) = auth {
        h.push(("Authorization", a));
    }
    let r = post_from(from, gw, &h, &body.to_string());
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["result"]["protocolVersion"], "2025-06-18");
    r.header("mcp-session-id").expect("a session id").to_owned()
}

pub(super) fn on_session(gw: SocketAddr, sid: &str, auth: Option<&str>, body: &Value) -> Reply {
    on_session_from(LOCAL, gw, sid, auth, body)
}

pub(super) fn on_session_from(
    from: IpAddr,
    gw: SocketAddr,
    sid: &str,
    auth: Option<&str>,
    body: &Value,
) -> Reply {
    let mut h = on(sid).to_vec();
    if let Some(a) = auth {
        h.push(("Authorization", a));
    }
    post_from(from, gw, &h, &body.to_string())
}

/// The `GET` that opens session `sid`'s standalone stream on `gw` (its connection kept open).
pub(super) fn stream_get(gw: SocketAddr, sid: &str) -> String {
    format!(
        "GET /mcp HTTP/1.1\r\nHost: {gw}\r\nAccept: text/event-stream\r\nMcp-Session-Id: {sid}\r\nMCP-Protocol-Version: 2025-06-18\r\n\r\n"
    )
}

/// The headers of a POST on session `sid`.
pub(super) fn on(sid: &str) -> [(&str, &str); 4] {
    [
        JSON,
        ACCEPT,
        ("Mcp-Session-Id", sid),
        ("MCP-Protocol-Version", "2025-06-18"),
    ]
}

#[test]
fn a_legs_progress_reaches_the_client_while_the_leg_runs() {
    // The leg on the client's own session (the default fleet: plain HTTP/1.1, direct leg),
    // and as a subrequest (pingora's pipe to the fleet).
    progress_while_the_leg_runs("", "inline");
    progress_while_the_leg_runs("connections: {upstream_leg: pingora}\n", "inside");
}

/// A call with progress through a gateway with `extra` YAML, its leg carried `how`.
fn progress_while_the_leg_runs(extra: &str, how: &str) {
    let pool = backend();
    let gw = gateway(&pool, extra);
    let a = gw.mcp_addr;
    let sid = open(a, None);
    let call = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
        "name": "test_tool_with_progress", "arguments": {}, "_meta": {"progressToken": "p1"}}});
    let h = on(&sid);
    let mut stream = SseStream::open(a, &h, &call.to_string());
    assert_eq!(stream.status, 200);
    let mut seen = Vec::new();
    let done = loop {
        let m = stream
            .next_message()
            .expect("a message before the stream ends");
        if m.get("id").is_some() {
            break (m, Instant::now());
        }
        assert_eq!(m["method"], "notifications/progress", "{m}");
        assert_eq!(m["params"]["progressToken"], "p1", "{m}");
        seen.push((m["params"]["progress"].as_u64().unwrap(), Instant::now()));
    };
    assert_eq!(
        done.0["result"]["content"][0]["text"], "Progress tool completed",
        "{}",
        done.0
    );
    let steps: Vec<u64> = seen.iter().map(|(p, _)| *p).collect();
    assert_eq!(steps, [0, 50, 100]);
    // The backend waits 50 ms after each of the first two: relayed as they happen, the first
    // reached the client at least that long before the result did (read whole, they would
    // have arrived together with it).
    let ahead = done.1 - seen[0].1;
    assert!(
        ahead.as_millis() >= 90,
        "{how}: progress 0 came only {ahead:?} before the result"
    );
    let m = scrape(&gw);
    let how = format!("connection=\"{how}\"");
    let legs = sample(
        &m,
        "mcp_edge_legacy_connections_total",
        &["leg=\"hop\"", &how],
    );
    assert!(legs >= 1.0, "{m}");
}

#[test]
fn the_standalone_stream_carries_the_fleets_list_changes() {
    let pool = backend();
    let gw = gateway(&pool, "");
    let a = gw.mcp_addr;
    let sid = open(a, None);
    let mut stream = SseStream::send(a, stream_get(a, &sid).as_bytes());
    assert_eq!(stream.status, 200);
    let ct = stream
        .headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("content-type"));
    assert!(
        ct.is_some_and(|(_, v)| v.starts_with("text/event-stream")),
        "{:?}",
        stream.headers
    );
    // The head arrives once the fleet's listen stream is open: a change announced now reaches it.
    let trigger = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "test_trigger_tool_change", "arguments": {}}});
    let r = on_session(a, &sid, None, &trigger);
    assert_eq!(r.status, 200, "{}", r.text());
    let n = stream
        .next_message()
        .expect("a list change on the standalone stream");
    assert_eq!(n["method"], "notifications/tools/list_changed", "{n}");
    assert!(n.get("id").is_none(), "{n}");
    assert!(
        n["params"]["_meta"]
            .get("io.modelcontextprotocol/subscriptionId")
            .is_none(),
        "the 2026 subscription id is not a 2025 client's: {n}"
    );
    // A session that is not this client's gets no stream.
    let forged =
        stream_get(a, &format!("{sid}x")).replace("\r\n\r\n", "\r\nConnection: close\r\n\r\n");
    let r = crate::support::http::raw(a, forged.as_bytes());
    assert_eq!(r.status, 404, "{}", r.text());
}

#[test]
fn the_console_shows_the_eras_and_a_2025_era_clients_session() {
    let pool = backend();
    let gw = gateway(&pool, "");
    let sid = open(gw.mcp_addr, None);
    assert!(!sid.is_empty());
    let admin = gw.admin_addr.unwrap();
    let s = crate::support::http::request(admin, "GET", "/-/console.json", &[], b"").json();
    let eras = &s["eras"];
    assert_eq!(eras["pools"][0]["era"], "2026-07-28", "{eras}");
    assert_eq!(
        eras["legacy_clients"]["sessions_opened"]["2025-06-18"], 1.0,
        "{eras}"
    );
    let endpoints = eras["endpoints"].as_array().unwrap();
    assert_eq!(endpoints[0]["endpoint"], "/mcp");
    assert_eq!(endpoints[0]["legacy_clients"], "bridge", "{eras}");
    assert_eq!(eras["pools"][0]["legacy_clients"], "bridge", "{eras}");
}

#[test]
fn standalone_streams_past_legacy_max_streams_are_refused_until_one_closes() {
    let pool = backend();
    let gw = gateway(&pool, "legacy: {max_streams: 1}\n");
    let a = gw.mcp_addr;
    let get = |sid: &str| stream_get(a, sid);
    let (one, two) = (open(a, None), open(a, None));
    let first = SseStream::send(a, get(&one).as_bytes());
    assert_eq!(first.status, 200);
    let r = crate::support::http::raw(
        a,
        get(&two)
            .replace("\r\n\r\n", "\r\nConnection: close\r\n\r\n")
            .as_bytes(),
    );
    assert_eq!(r.status, 503, "{}", r.text());
    assert_eq!(r.header("retry-after"), Some("5"));
    assert_eq!(r.json()["error"]["code"], -31007, "{}", r.text());
    assert_eq!(
        sample(&scrape(&gw), "mcp_edge_legacy_streams_open", &[]),
        1.0
    );
    // The first client leaves: its place is free again.
    drop(first);
    let freed = crate::support::eventually(std::time::Duration::from_secs(20), || {
        sample(&scrape(&gw), "mcp_edge_legacy_streams_open", &[]) == 0.0
    });
    assert!(freed, "the stream's place was never given back");
    let again = SseStream::send(a, get(&two).as_bytes());
    assert_eq!(again.status, 200);
}

/// `POST /-/explain` of a 2025-era request on the admin listener.
fn explain(gw: &mcp_edge::gateway::RunningGateway, headers: Value, body: &Value) -> Value {
    let q = json!({"headers": headers, "body": body.to_string()});
    let h = [("Content-Type", "application/json")];
    let admin = gw.admin_addr.unwrap();
    let r =
        crate::support::http::request(admin, "POST", "/-/explain", &h, q.to_string().as_bytes());
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()
}

#[test]
fn explain_follows_a_2025_era_request_through_the_bridge() {
    let pool = backend();
    let gw = gateway(&pool, "");
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "x", "version": "1"}}});
    let v = explain(&gw, json!({"Content-Type": "application/json"}), &init);
    assert_eq!(v["verdict"], "answered", "{v}");
    assert!(
        v["bridge"]["answers"]
            .as_str()
            .unwrap()
            .contains("initialize"),
        "{v}"
    );

    // A call on a session becomes a 2026 request, walked through every stage.
    let sid = open(gw.mcp_addr, None);
    let call = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "hi"}}});
    let on = |sid: &str| {
        json!({"Content-Type": "application/json", "Mcp-Session-Id": sid,
        "MCP-Protocol-Version": "2025-06-18", "Mcp-Name": "not-what-the-body-says"})
    };
    let v = explain(&gw, on(&sid), &call);
    assert_eq!(v["era"], "2025-06-18", "{v}");
    assert_eq!(v["verdict"], "forwarded", "{v}");
    assert_eq!(
        v["bridge"]["becomes"]["name"], "echo",
        "the body names the tool: {v}"
    );
    let stages: Vec<&str> = v["stages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        stages.contains(&"check") && stages.contains(&"balance"),
        "{v}"
    );

    // An altered session id, or another caller's, is refused as the bridge refuses it.
    let v = explain(&gw, on(&format!("{sid}x")), &call);
    assert_eq!(v["verdict"], "refused", "{v}");
    assert_eq!(v["answer"]["status"], 404, "{v}");
    let mut theirs = on(&sid);
    theirs["Authorization"] = json!("Bearer mallory");
    let v = explain(&gw, theirs, &call);
    assert_eq!(
        (v["verdict"].as_str(), v["answer"]["code"].as_i64()),
        (Some("refused"), Some(-31014)),
        "{v}"
    );
}

/// A client's `notifications/cancelled` ends its waiting call on the replica it reaches, and
/// on the replica holding the call when it reaches another one (`legacy.replicas`).
#[test]
fn a_cancellation_ends_the_call_here_or_on_the_replica_that_holds_it() {
    let pool = backend();
    let replicas = super::Replicas::start(&pool, ", answer_timeout: 20s");
    let (a, b) = (&replicas.a, &replicas.b);
    let sid = open(a.mcp_addr, None);
    for (id, to) in [(5, a.mcp_addr), (6, b.mcp_addr)] {
        let call = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
            "name": "test_input_required_result_elicitation", "arguments": {}}});
        let mut stream = SseStream::open(a.mcp_addr, &on(&sid), &call.to_string());
        let asked = stream.next_message().expect("the question");
        assert_eq!(asked["method"], "elicitation/create", "{asked}");
        let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": id, "reason": "the user gave up"}});
        let r = on_session(to, &sid, None, &cancel);
        assert_eq!(r.status, 202, "{}", r.text());
        let end = stream.next_message().expect("the call's end");
        assert_eq!(end["id"], id, "{end}");
        assert!(
            end["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("cancelled")),
            "{end}"
        );
    }
    let (ma, mb) = (scrape(a), scrape(b));
    assert_eq!(
        sample(&ma, "mcp_edge_legacy_flows_total", &["cancelled"]),
        2.0
    );
    assert_eq!(
        sample(&ma, "mcp_edge_legacy_cancels_total", &["local"]),
        2.0
    );
    assert_eq!(sample(&mb, "mcp_edge_legacy_cancels_total", &["sent"]), 1.0);
}
