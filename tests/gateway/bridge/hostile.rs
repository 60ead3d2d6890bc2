//! Hostile 2025-era clients against the bridge, over raw sockets: a forged, altered or other
//! caller's session id is answered 404 (the client opens a new session), a request without one
//! 400; an answer to a question the gateway never asked, or asked on another session, is
//! refused; a client that never answers ends its call with an error after
//! `legacy.answer_timeout` and nothing stays waiting; an operator can refuse legacy clients;
//! a limit keyed on `client_ip` sees each client's own address through the bridge's hop; a
//! client that leaves mid-call closes the upstream request.

use serde_json::{json, Value};
use std::net::IpAddr;

use super::raw::{on, on_session, on_session_from, open, open_from, ACCEPT, JSON};
use super::{backend, gateway};
use crate::support::http::{post, request, SseStream};
use crate::support::{sample, scrape};

fn list(id: i64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/list", "params": {}})
}

#[test]
fn forged_altered_and_other_callers_sessions_are_not_found() {
    let pool = backend();
    let gw = gateway(&pool, "");
    let a = gw.mcp_addr;
    let sid = open(a, Some("Bearer alice"));
    let ok = on_session(a, &sid, Some("Bearer alice"), &list(2));
    assert_eq!(ok.status, 200, "{}", ok.text());
    assert!(ok.json()["result"]["tools"].as_array().unwrap().len() > 5);
    assert!(
        ok.json()["result"].get("resultType").is_none(),
        "2026-only members are dropped"
    );

    let other = on_session(a, &sid, Some("Bearer mallory"), &list(3));
    assert_eq!(
        (other.status, other.error_code()),
        (404, -31014),
        "{}",
        other.text()
    );
    assert_eq!(other.json()["error"]["data"]["reason"], "other_caller");
    let bare = on_session(a, &sid, None, &list(4));
    assert_eq!(bare.status, 404, "{}", bare.text());

    let mut altered = sid.clone().into_bytes();
    let i = altered.len() - 5;
    altered[i] = if altered[i] == b'A' { b'B' } else { b'A' };
    let altered = String::from_utf8(altered).unwrap();
    let r = on_session(a, &altered, Some("Bearer alice"), &list(5));
    assert_eq!((r.status, r.error_code()), (404, -31014), "{}", r.text());
    let r = on_session(a, "es1.00000000.AAAA", Some("Bearer alice"), &list(6));
    assert_eq!(r.status, 404, "{}", r.text());

    let none = post(
        a,
        &[JSON, ACCEPT, ("MCP-Protocol-Version", "2025-06-18")],
        &list(7).to_string(),
    );
    assert_eq!(
        (none.status, none.error_code()),
        (400, -31015),
        "{}",
        none.text()
    );

    // DELETE ends the session: it is not found from then on.
    let del = request(
        a,
        "DELETE",
        "/mcp",
        &[
            ("Mcp-Session-Id", sid.as_str()),
            ("Authorization", "Bearer alice"),
        ],
        b"",
    );
    assert_eq!(del.status, 200, "{}", del.text());
    let after = on_session(a, &sid, Some("Bearer alice"), &list(9));
    assert_eq!(
        (after.status, after.error_code()),
        (404, -31014),
        "{}",
        after.text()
    );
    assert_eq!(after.json()["error"]["data"]["reason"], "ended");

    // A session of another gateway (another key) is unknown here.
    let other_gw = gateway(&pool, "");
    let foreign = open(other_gw.mcp_addr, Some("Bearer alice"));
    let r = on_session(a, &foreign, Some("Bearer alice"), &list(8));
    assert_eq!(r.status, 404, "{}", r.text());
    assert_eq!(r.json()["error"]["data"]["reason"], "unknown_key");
}

#[test]
fn answers_to_questions_never_asked_or_asked_elsewhere_are_refused() {
    let pool = backend();
    let gw = gateway(&pool, "legacy: { answer_timeout: 20s }\n");
    let a = gw.mcp_addr;
    let (s1, s2) = (open(a, None), open(a, None));
    let forged = json!({"jsonrpc": "2.0", "id": "ea1.00000000.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "result": {"action": "accept"}});
    let r = on_session(a, &s1, None, &forged);
    assert_eq!((r.status, r.error_code()), (400, -31015), "{}", r.text());
    let r = on_session(
        a,
        &s1,
        None,
        &json!({"jsonrpc": "2.0", "id": 42, "result": {}}),
    );
    assert_eq!(r.status, 400, "{}", r.text());

    // A real question on session 1, answered with session 2's id: refused; then answered right.
    let call = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "test_input_required_result_elicitation", "arguments": {}}});
    let h = on(&s1);
    let mut stream = SseStream::open(a, &h, &call.to_string());
    assert_eq!(stream.status, 200);
    let ask = stream.next_message().expect("the question");
    assert_eq!(ask["method"], "elicitation/create", "{ask}");
    let answer = json!({"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "accept", "content": {"name": "Ada"}}});
    let r = on_session(a, &s2, None, &answer);
    assert_eq!((r.status, r.error_code()), (400, -31015), "{}", r.text());
    let r = on_session(a, &s1, None, &answer);
    assert_eq!(r.status, 202, "{}", r.text());
    let done = stream.next_message().expect("the result");
    assert_eq!(done["id"], 9);
    assert_eq!(
        done["result"]["content"][0]["text"], "Hello, Ada!",
        "{done}"
    );
    // The same answer again: its call no longer waits.
    let r = on_session(a, &s1, None, &answer);
    assert_eq!(r.status, 400, "{}", r.text());
}

#[test]
fn a_client_that_never_answers_ends_its_call_and_nothing_stays_waiting() {
    let pool = backend();
    let gw = gateway(&pool, "legacy: { answer_timeout: 300ms }\n");
    let a = gw.mcp_addr;
    let sid = open(a, None);
    let call = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "test_input_required_result_elicitation", "arguments": {}}});
    let h = on(&sid);
    let mut stream = SseStream::open(a, &h, &call.to_string());
    assert_eq!(
        stream.next_message().unwrap()["method"],
        "elicitation/create"
    );
    let end = stream.next_message().expect("the call's end");
    assert_eq!(end["id"], 5);
    assert_eq!(end["error"]["code"], -31016, "{end}");
    assert!(stream.next_message().is_none(), "the stream ends");
    let m = scrape(&gw);
    assert_eq!(
        sample(&m, "mcp_edge_legacy_flows_total", &["timed_out"]),
        1.0
    );
    // A capability the client did not declare is never asked.
    let roots = json!({"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": {"name": "test_input_required_result_list_roots", "arguments": {}}});
    let r = on_session(a, &sid, None, &roots);
    assert_ne!(r.status, 500, "{}", r.text());
    assert!(!r.text().contains("roots/list\",\"params"), "{}", r.text());
}

#[test]
fn an_operator_can_refuse_legacy_clients_on_one_endpoint() {
    let pool = backend();
    let gw = gateway(&pool, "legacy: { refuse_on: [/mcp] }\n");
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}}});
    let r = post(gw.mcp_addr, &[JSON], &body.to_string());
    assert_eq!((r.status, r.error_code()), (400, -32022), "{}", r.text());
    let get = request(gw.mcp_addr, "GET", "/mcp", &[("Mcp-Session-Id", "x")], b"");
    assert_eq!(get.status, 405, "{}", get.text());
}

#[test]
fn a_limit_keyed_on_the_client_address_sees_each_legacy_clients_own() {
    let pool = backend();
    let limit = "rate_limits:\n  - {name: per-ip, match: {method: tools/call}, key: [client_ip], rate: 2/m}\n";
    let gw = gateway(&pool, limit);
    let a = gw.mcp_addr;
    let (alice, bob): (IpAddr, IpAddr) =
        ("127.0.0.2".parse().unwrap(), "127.0.0.3".parse().unwrap());
    let echo = |id: i64| json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "hi"}}});
    let sa = open_from(alice, a, None);
    for id in 2..4 {
        let r = on_session_from(alice, a, &sa, None, &echo(id));
        assert_eq!(r.status, 200, "{}", r.text());
        assert!(r.text().contains("\"result\""), "{}", r.text());
    }
    let over = on_session_from(alice, a, &sa, None, &echo(4));
    assert_eq!(
        over.status,
        429,
        "the third call from one address is over: {}",
        over.text()
    );
    assert!(over.header("retry-after").is_some(), "{:?}", over.headers);
    // Another client, another address, its own bucket: through the same hop listener.
    let sb = open_from(bob, a, None);
    let r = on_session_from(bob, a, &sb, None, &echo(2));
    assert_eq!(r.status, 200, "bob is not alice: {}", r.text());
    // And a 2026 client on the gateway's own address has its own too.
    let r = post(
        a,
        &crate::support::refs(&crate::support::call_headers("echo")),
        &crate::support::call(9, "echo"),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    // Every request of both sessions (each `initialize`'s `server/discover`, alice's three
    // calls, bob's one) went through the pipeline inside the process, on the client's own
    // session (the fleet is plain HTTP/1.1 on the direct leg), which sees the client's own
    // address; none as a subrequest, none on the loopback hop.
    let m = scrape(&gw);
    let hop = |how: &str| {
        let how = format!("connection=\"{how}\"");
        sample(
            &m,
            "mcp_edge_legacy_connections_total",
            &["leg=\"hop\"", &how],
        )
    };
    assert_eq!(hop("inline"), 6.0, "{m}");
    assert_eq!(hop("inside"), 0.0, "{m}");
    assert_eq!(hop("new") + hop("kept"), 0.0, "{m}");
}

#[test]
fn a_client_that_leaves_mid_call_closes_the_upstream_request() {
    // A call's leg runs inside the gateway's own pipeline (on the client's own session): when
    // the client leaves, the instance must see its request closed, as it does for a 2026
    // client. The upstream answers the session's `server/discover`, then holds the
    // call and reports when the gateway closes it.
    use crate::support::raw::{gateway, Raw};
    use std::io::Write;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::time::Duration;
    let saw_close = Arc::new(AtomicUsize::new(0));
    let seen_close = saw_close.clone();
    let up = Raw::start(move |n, s| {
        if n == 1 {
            let body = r#"{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{"tools":{}},"serverInfo":{"name":"raw","version":"1"}}}"#;
            let head = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
                body.len()
            );
            s.write_all(head.as_bytes()).unwrap();
            s.write_all(body.as_bytes()).unwrap();
            return true;
        }
        crate::support::raw::hold_until_closed(s, &seen_close);
        false
    });
    let gw = gateway(&up, "timeouts: { upstream_read: 30s }\n");
    let sid = open(gw.mcp_addr, None);
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "t", "arguments": {}}});
    let mut c = std::net::TcpStream::connect(gw.mcp_addr).unwrap();
    let req = crate::support::post_bytes(&on(&sid), call.to_string().as_bytes());
    c.write_all(&req).unwrap();
    let arrived = crate::support::eventually(Duration::from_secs(10), || up.seen().len() == 2);
    assert!(arrived, "the call reached the upstream");
    assert!(
        up.seen()[1].head.contains("mcp-method: tools/call"),
        "{}",
        up.seen()[1].head
    );
    drop(c);
    let closed = crate::support::eventually(Duration::from_secs(10), || {
        saw_close.load(Ordering::SeqCst) == 1
    });
    assert!(
        closed,
        "the upstream request was closed when the client left"
    );
    let m = scrape(&gw);
    let hop = |how: &str| {
        let how = format!("connection=\"{how}\"");
        sample(
            &m,
            "mcp_edge_legacy_connections_total",
            &["leg=\"hop\"", &how],
        )
    };
    assert_eq!(
        hop("inline"),
        2.0,
        "the session's discover and the call, on the client's session: {m}"
    );
}
