//! Forwarding: bodies arrive byte for byte at every size (no 64 KiB cliff), chunked bodies,
//! `Expect: 100-continue`, hop-by-hop headers, SSE streamed unbuffered and cancelled upstream
//! when the client leaves, the header-only fast path, upstream failures, slow clients.

use crate::support::*;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// A tools/call body padded to exactly `size` bytes.
fn body_of_size(size: usize) -> String {
    let base = call(1, "big_tool");
    let pad_at = base.find("\"arguments\":{}").unwrap() + "\"arguments\":{".len();
    let overhead = base.len() + "\"pad\":\"\"".len();
    assert!(
        size >= overhead,
        "size {size} below the envelope's {overhead}"
    );
    let mut b = base.clone();
    b.insert_str(
        pad_at,
        &format!("\"pad\":\"{}\"", "x".repeat(size - overhead)),
    );
    assert_eq!(b.len(), size);
    b
}

#[test]
fn bodies_arrive_byte_identical_on_both_sides_of_64_kib() {
    let up = Upstreams::start(1);
    let gw = simple_gateway(&up, "");
    let h = call_headers("big_tool");
    for size in [
        400,
        64 * 1024 - 1,
        64 * 1024,
        64 * 1024 + 1,
        512 * 1024,
        1024 * 1024,
    ] {
        let body = body_of_size(size);
        let r = post(gw.mcp_addr, &refs(&h), &body);
        assert_eq!(
            r.status,
            200,
            "size {size}: {}",
            String::from_utf8_lossy(&r.body)
        );
        assert_eq!(r.json()["len"], size, "size {size}");
        let got = up.received().pop().unwrap();
        assert!(
            got.body == body.as_bytes(),
            "size {size}: body changed on the way"
        );
    }
    // One byte over the limit: 413 with a JSON-RPC body, nothing forwarded.
    let before = up.count();
    let r = post(gw.mcp_addr, &refs(&h), &body_of_size(1024 * 1024 + 1));
    assert_eq!(r.status, 413);
    assert_eq!(r.error_code(), -31002);
    assert_eq!(up.count(), before);
}

#[test]
fn a_one_byte_body_is_refused_as_json_but_a_tiny_limit_applies_to_chunked_bodies() {
    let up = Upstreams::start(1);
    let gw = simple_gateway(&up, "limits:\n  max_body_bytes: 2000\n");
    let h = call_headers("t");
    // 1 byte: forwarded to the check, which refuses it (it is not a request).
    let r = post(gw.mcp_addr, &refs(&h), "1");
    assert_eq!((r.status, r.error_code()), (400, -32600));
    // A chunked body over the limit is cut off when the limit is crossed.
    let mut req = b"POST /mcp HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n".to_vec();
    for (k, v) in &h {
        req.extend_from_slice(format!("{k}: {v}\r\n").as_bytes());
    }
    req.extend_from_slice(b"\r\n");
    for _ in 0..3 {
        req.extend_from_slice(format!("3e8\r\n{}\r\n", "x".repeat(1000)).as_bytes());
    }
    req.extend_from_slice(b"0\r\n\r\n");
    let r = raw(gw.mcp_addr, &req);
    assert_eq!((r.status, r.error_code()), (413, -31002));
    assert_eq!(up.count(), 0);
}

#[test]
fn chunked_bodies_are_checked_and_forwarded_whole() {
    let up = Upstreams::start(1);
    let gw = simple_gateway(&up, "");
    let h = call_headers("big_tool");
    let body = body_of_size(200_000);
    let mut req = b"POST /mcp HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n".to_vec();
    for (k, v) in &h {
        req.extend_from_slice(format!("{k}: {v}\r\n").as_bytes());
    }
    req.extend_from_slice(b"\r\n");
    for chunk in body.as_bytes().chunks(7000) {
        req.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
        req.extend_from_slice(chunk);
        req.extend_from_slice(b"\r\n");
    }
    req.extend_from_slice(b"0\r\n\r\n");
    let r = raw(gw.mcp_addr, &req);
    assert_eq!(r.status, 200);
    assert!(up.received().pop().unwrap().body == body.as_bytes());
}

#[test]
fn expect_100_continue_is_answered_and_hop_by_hop_headers_are_stripped() {
    let up = Upstreams::start(1);
    let gw = simple_gateway(&up, "");
    let body = call(5, "t");
    let mut head = format!(
        "POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\nExpect: 100-continue\r\n",
        body.len()
    );
    for (k, v) in call_headers("t") {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("Connection: keep-alive, X-Hop\r\nX-Hop: secret\r\nKeep-Alive: timeout=5\r\nTE: trailers\r\nMcp-Param-Region: eu\r\n\r\n");
    let s = TcpStream::connect(gw.mcp_addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    (&s).write_all(head.as_bytes()).unwrap();
    // The client waits for 100 Continue before sending the body.
    let mut r = BufReader::new(s.try_clone().unwrap());
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    assert!(line.starts_with("HTTP/1.1 100"), "{line:?}");
    let mut blank = String::new();
    r.read_line(&mut blank).unwrap();
    (&s).write_all(body.as_bytes()).unwrap();
    let resp = read_reply(&mut r).unwrap();
    assert_eq!(resp.status, 200);
    let got = up.received().pop().unwrap();
    for hop in ["expect", "keep-alive", "te", "x-hop"] {
        assert!(
            got.headers.get(hop).is_none(),
            "{hop} must not reach the upstream"
        );
    }
    assert_eq!(got.headers.get("mcp-param-region").unwrap(), "eu");
    assert_eq!(got.body, body.as_bytes());
}

#[test]
fn sse_is_streamed_event_by_event_and_cancelled_when_the_client_leaves() {
    let up = Upstreams::start(1);
    let gw = simple_gateway(&up, "");
    let mut h = call_headers("slow_tool");
    h.push(("x-test-sse", "10".into()));
    let req = post_bytes(&refs(&h), call(1, "slow_tool").as_bytes());
    let s = TcpStream::connect(gw.mcp_addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let start = Instant::now();
    (&s).write_all(&req).unwrap();
    let mut r = BufReader::new(s.try_clone().unwrap());
    // Read until the first data event.
    let mut seen = String::new();
    let mut line = String::new();
    while !seen.contains("\"progress\":0") {
        line.clear();
        assert!(
            r.read_line(&mut line).unwrap() > 0,
            "stream ended early: {seen}"
        );
        seen.push_str(&line);
    }
    let first = start.elapsed();
    // The whole stream takes ~2 s; the first event must arrive long before that.
    assert!(
        first < Duration::from_millis(1000),
        "first event after {first:?}: buffered?"
    );
    assert!(
        seen.to_ascii_lowercase()
            .contains("content-type: text/event-stream"),
        "{seen}"
    );
    assert!(
        seen.contains(": keep-alive"),
        "comment lines pass through: {seen}"
    );
    // Second event arrives ~200 ms later, in order.
    while !seen.contains("\"progress\":1") {
        line.clear();
        assert!(r.read_line(&mut line).unwrap() > 0);
        seen.push_str(&line);
    }
    // Leave: the gateway must close the upstream stream promptly.
    drop(r);
    s.shutdown(std::net::Shutdown::Both).unwrap();
    drop(s);
    assert!(
        eventually(Duration::from_secs(3), || !up
            .log
            .lock()
            .unwrap()
            .cancelled_streams
            .is_empty()),
        "the upstream stream was not closed after the client left"
    );
    let (_, sent) = up.log.lock().unwrap().cancelled_streams[0];
    assert!(sent < 10, "the upstream kept streaming ({sent} events)");
}

#[test]
fn sampled_out_requests_skip_the_check_but_header_problems_are_still_refused() {
    let up = Upstreams::start(1);
    let gw = simple_gateway(&up, "validation:\n  sample: 0.0\n");
    // A lying Mcp-Name passes on the header-only fast path (that is what sample 0 means)…
    let r = post(
        gw.mcp_addr,
        &refs(&call_headers("claimed")),
        &call(1, "actual"),
    );
    assert_eq!(r.status, 200);
    assert_eq!(up.count(), 1);
    // …but a missing header is visible without the body and is still refused.
    let r = post(
        gw.mcp_addr,
        &[("MCP-Protocol-Version", "2026-07-28"), ("Mcp-Name", "x")],
        &call(2, "x"),
    );
    assert_eq!((r.status, r.error_code()), (400, -32020));
    assert_eq!(r.json()["id"], 2);
    assert_eq!(up.count(), 1);
    // Bodies over the limit are refused on the fast path too.
    let big = format!("{}{}", call(3, "x"), " ".repeat(1024 * 1024));
    let r = post(gw.mcp_addr, &refs(&call_headers("x")), &big);
    assert_eq!(r.status, 413);
}

#[test]
fn upstream_failures_get_json_rpc_errors_with_the_id() {
    // An instance that refuses connections.
    let dead = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let cfg = config(
        &[("default", &[dead], "balance: round_robin")],
        "default_route: {pool: default}\n",
    );
    let gw = mcp_edge::gateway::RunningGateway::start(cfg).unwrap();
    let r = post(gw.mcp_addr, &refs(&call_headers("t")), &call(77, "t"));
    assert_eq!(r.status, 502);
    assert_eq!(r.error_code(), -31003);
    assert_eq!(r.json()["id"], 77);
    assert!(r.json()["error"]["message"]
        .as_str()
        .unwrap()
        .contains(&dead.to_string()));
    drop(gw);
    // An instance that takes the request and drops the connection: not re-sent.
    let up = Upstreams::start(1);
    let gw = simple_gateway(&up, "");
    let mut h = call_headers("charge");
    h.push(("x-test-close", "1".into()));
    let r = post(gw.mcp_addr, &refs(&h), &call(78, "charge"));
    assert_eq!(r.status, 502);
    assert_eq!(r.error_code(), -31006);
    assert_eq!(r.json()["id"], 78);
    assert_eq!(up.count(), 1, "a delivered request is never sent twice");
}

#[test]
fn a_client_trickling_its_body_is_cut_off() {
    let up = Upstreams::start(1);
    let gw = simple_gateway(&up, "timeouts:\n  downstream_read: 300ms\n");
    let body = call(9, "t");
    let mut head = format!(
        "POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in call_headers("t") {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    let s = TcpStream::connect(gw.mcp_addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    (&s).write_all(head.as_bytes()).unwrap();
    (&s).write_all(&body.as_bytes()[..10]).unwrap();
    let start = Instant::now();
    // Never send the rest: the gateway must give up, answer or close, well before 5 s.
    let mut buf = Vec::new();
    let _ = (&s).read_to_end(&mut buf);
    assert!(
        start.elapsed() < Duration::from_secs(4),
        "held for {:?}",
        start.elapsed()
    );
    assert_eq!(
        up.count(),
        0,
        "an incomplete request never completes upstream"
    );
}

#[test]
fn upstream_connections_are_reused() {
    let up = Upstreams::start(1);
    let gw = simple_gateway(&up, "");
    for i in 0..20 {
        let r = post(gw.mcp_addr, &refs(&call_headers("t")), &call(i, "t"));
        assert_eq!(r.status, 200);
    }
    // Twenty requests, each on a new client connection, reach the instance over one reused
    // upstream connection.
    let ports: std::collections::HashSet<u16> =
        up.received().iter().map(|r| r.peer.port()).collect();
    assert_eq!(ports.len(), 1, "upstream connections used: {ports:?}");
}
