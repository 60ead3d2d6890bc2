//! The direct leg (`connections.upstream_leg: direct`, the default: a body in hand forwarded
//! from the gateway's first phase, `gateway::journey::direct`) on the wire, against a raw upstream
//! (`support::raw`): a request written whole is never re-sent, a client that leaves closes the
//! upstream request, a sampled-out small body is read whole (so an error answer names it), an
//! empty answer leaves both connections reusable, the instance is chosen on the client's
//! headers as in pingora's pipe, and the setting applies with a reload. Everything on
//! 127.0.0.1.

use crate::support;
use std::io::Write;
use std::net::TcpStream;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::support::raw::{gateway, gateway_config, ok_json, Raw, IN_PINGORAS_PIPE};
use crate::support::*;

#[test]
fn a_request_written_whole_is_never_sent_twice_even_on_a_pooled_connection() {
    // The second request arrives on the pooled connection; the upstream reads it whole and
    // closes without a byte of answer (as if it crashed while running the call).
    let up = Raw::start(|n, s| {
        if n == 2 {
            return false;
        }
        ok_json(s, n);
        true
    });
    let gw = gateway(&up, "");
    let r = post(gw.mcp_addr, &refs(&call_headers("t")), &call(1, "t"));
    assert_eq!(r.status, 200, "{}", r.text());
    let r = post(gw.mcp_addr, &refs(&call_headers("t")), &call(2, "t"));
    assert_eq!(r.status, 502, "{}", r.text());
    assert_eq!(r.json()["id"], 2, "{}", r.text());
    assert_eq!(
        r.json()["error"]["code"],
        mcp_edge::mcp::error::codes::GATEWAY_UPSTREAM_FAILED,
        "{}",
        r.text()
    );
    assert_eq!(up.seen().len(), 2, "the second request was not re-sent");
    // The next request gets a fresh connection and its answer.
    let r = post(gw.mcp_addr, &refs(&call_headers("t")), &call(3, "t"));
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(up.accepted.load(Ordering::SeqCst), 2);
}

#[test]
fn a_client_that_leaves_mid_answer_closes_the_upstream_request() {
    // The upstream never answers; it reports when its connection is closed by the gateway.
    let saw_close = Arc::new(AtomicUsize::new(0));
    let seen_close = saw_close.clone();
    let up = Raw::start(move |_, s| {
        crate::support::raw::hold_until_closed(s, &seen_close);
        false
    });
    let gw = gateway(&up, "timeouts: { upstream_read: 30s }\n");
    let mut c = TcpStream::connect(gw.mcp_addr).unwrap();
    let req = post_bytes(&refs(&call_headers("t")), call(1, "t").as_bytes());
    c.write_all(&req).unwrap();
    let arrived = eventually(Duration::from_secs(10), || up.seen().len() == 1);
    assert!(arrived, "the request reached the upstream");
    drop(c);
    let closed = eventually(Duration::from_secs(10), || {
        saw_close.load(Ordering::SeqCst) == 1
    });
    assert!(
        closed,
        "the upstream connection was closed when the client left"
    );
}

#[test]
fn a_sampled_out_request_the_upstream_drops_is_answered_with_its_id() {
    // Sampled out, the body is not checked; small, it is read whole for the direct leg, and the
    // gateway's answer to the upstream's failure still names the request.
    let up = Raw::start(|_, _| false);
    let gw = gateway(&up, "validation: { sample: 0.0 }\n");
    let r = post(gw.mcp_addr, &refs(&call_headers("t")), &call(41, "t"));
    assert_eq!(r.status, 502, "{}", r.text());
    assert_eq!(r.json()["id"], 41, "{}", r.text());
    assert_eq!(up.seen().len(), 1, "sent once");
    assert_eq!(up.seen()[0].body, call(41, "t").as_bytes());
}

#[test]
fn the_upstream_leg_setting_applies_with_a_reload() {
    // Only the direct leg reads a sampled-out body whole, so only it can name the request when
    // the upstream drops it: what the answer carries shows which leg carried the request.
    let up = Raw::start(|_, _| false);
    let s0 = "validation: { sample: 0.0 }\n";
    let gw = gateway(&up, &format!("{s0}{IN_PINGORAS_PIPE}"));
    let r = post(gw.mcp_addr, &refs(&call_headers("t")), &call(7, "t"));
    assert_eq!(r.status, 502, "{}", r.text());
    assert!(r.json()["id"].is_null(), "streamed: {}", r.text());
    let mut cfg = gateway_config(&up, s0);
    cfg.listen = gw.current().config.listen.clone();
    gw.reload(cfg).unwrap();
    let r = post(gw.mcp_addr, &refs(&call_headers("t")), &call(8, "t"));
    assert_eq!(r.status, 502, "{}", r.text());
    assert_eq!(r.json()["id"], 8, "direct after the reload: {}", r.text());
}

#[test]
fn an_empty_answer_to_a_notification_leaves_both_connections_reusable() {
    // A notification gets 202 with no body; the next request goes over the same client
    // connection and the same upstream connection.
    let up = Raw::start(|n, s| {
        if n == 1 {
            s.write_all(b"HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n")
                .unwrap();
        } else {
            ok_json(s, n);
        }
        true
    });
    let gw = gateway(&up, "");
    let mut c = TcpStream::connect(gw.mcp_addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut r = std::io::BufReader::new(c.try_clone().unwrap());
    let note = r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}"#;
    let mut h = plain_headers("notifications/cancelled");
    h.push(("Content-Type", "application/json"));
    c.write_all(&post_bytes(&h, note.as_bytes())).unwrap();
    let first = support::http::read_reply(&mut r).unwrap();
    assert_eq!(first.status, 202, "{}", first.text());
    assert!(first.text().is_empty());
    c.write_all(&post_bytes(
        &refs(&call_headers("t")),
        call(2, "t").as_bytes(),
    ))
    .unwrap();
    let second = support::http::read_reply(&mut r).unwrap();
    assert_eq!(second.status, 200, "{}", second.text());
    assert_eq!(second.json()["id"], 2);
    assert_eq!(
        up.accepted.load(Ordering::SeqCst),
        1,
        "one upstream connection"
    );
}

#[test]
fn the_instance_is_chosen_on_the_headers_the_client_sent() {
    chosen_on_the_client_headers("");
}

#[test]
fn inside_pingoras_pipe_the_instance_is_chosen_the_same_way() {
    chosen_on_the_client_headers(IN_PINGORAS_PIPE);
}

fn chosen_on_the_client_headers(extra: &str) {
    // The pool shards on a header the client lists in `Connection` (so it is hop-by-hop and
    // not forwarded): the shard is still chosen on it, as pingora's pipe chooses, so one value
    // always lands on one instance.
    let a = Raw::start(|n, s| {
        ok_json(s, n);
        true
    });
    let b = Raw::start(|n, s| {
        ok_json(s, n);
        true
    });
    let cfg = config(
        &[(
            "default",
            &[a.server.addr, b.server.addr],
            "balance: hash\n    hash_key: header:x-shard\n    health: {check: off}",
        )],
        &format!("default_route: {{pool: default}}\n{extra}"),
    );
    let gw = mcp_edge::gateway::RunningGateway::start(cfg).unwrap();
    let mut id = 0;
    for shard in ["a", "b", "c", "d", "e", "f"] {
        let before = (a.seen().len(), b.seen().len());
        for _ in 0..4 {
            id += 1;
            let mut h = call_headers("t");
            h.push(("x-shard", shard.into()));
            h.push(("connection", "keep-alive, x-shard".into()));
            let r = post(gw.mcp_addr, &refs(&h), &call(id, "t"));
            assert_eq!(r.status, 200, "{}", r.text());
        }
        let got = (a.seen().len() - before.0, b.seen().len() - before.1);
        assert!(got == (4, 0) || got == (0, 4), "shard {shard}: {got:?}");
    }
    let all = a.seen().into_iter().chain(b.seen());
    for s in all {
        assert!(
            !s.head.contains("x-shard"),
            "hop-by-hop, not forwarded: {}",
            s.head
        );
    }
}
