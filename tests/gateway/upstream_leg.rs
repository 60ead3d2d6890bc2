//! The gateway's own upstream HTTP/1.1 leg on the wire, against a raw upstream whose every byte
//! the test decides (`support::raw`): one write per request, keep-alive reuse, an idle
//! connection the upstream closed, chunked / close-delimited / SSE responses, an upstream that
//! dies mid-body, an h2 client's request. Most run on the default, `connections.upstream_leg:
//! direct` (a body in hand forwarded from the gateway's first phase); the ones marked so run on
//! `pingora` too (pingora's proxy pipe and client). What only the direct leg does is in
//! `direct_leg`. Everything on 127.0.0.1.

use crate::support;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::support::raw::{gateway, ok_json, Raw, IN_PINGORAS_PIPE};
use crate::support::*;

#[test]
fn each_request_reaches_the_upstream_in_one_write_over_one_reused_connection() {
    one_write_per_request_over_one_connection("");
}

fn one_write_per_request_over_one_connection(extra: &str) {
    let up = Raw::start(|n, s| {
        ok_json(s, n);
        true
    });
    let gw = gateway(&up, extra);
    for i in 1..=20u64 {
        let r = post(gw.mcp_addr, &refs(&call_headers("t")), &call(i, "t"));
        assert_eq!(r.status, 200, "{}", r.text());
        assert_eq!(r.json()["id"], i, "{}", r.text());
    }
    let seen = up.seen();
    assert_eq!(seen.len(), 20);
    for (i, s) in seen.iter().enumerate() {
        assert_eq!(
            s.first_read, s.whole,
            "request {i}: the head and the body arrived in separate writes ({} of {} bytes first)",
            s.first_read, s.whole
        );
        assert_eq!(
            s.body,
            call(i as u64 + 1, "t").as_bytes(),
            "the body unchanged"
        );
    }
    assert_eq!(
        up.accepted.load(Ordering::SeqCst),
        1,
        "one upstream connection"
    );
}

#[test]
fn an_idle_connection_the_upstream_closed_costs_the_client_nothing() {
    // Each connection carries one answer, then the upstream closes it (without saying so).
    let up = Raw::start(|n, s| {
        ok_json(s, n);
        false
    });
    let gw = gateway(&up, "");
    for i in 1..=5u64 {
        // The next request only once the upstream has closed the last connection (on loopback
        // its FIN is then already queued on the gateway's side).
        let closed = eventually(Duration::from_secs(10), || {
            up.closed.load(Ordering::SeqCst) as u64 == i - 1
        });
        assert!(closed, "the upstream closed connection {}", i - 1);
        let r = post(gw.mcp_addr, &refs(&call_headers("t")), &call(i, "t"));
        assert_eq!(r.status, 200, "request {i}: {}", r.text());
    }
    assert_eq!(up.seen().len(), 5, "no request was sent twice");
    assert_eq!(up.accepted.load(Ordering::SeqCst), 5);
}

#[test]
fn chunked_and_close_delimited_responses_reach_the_client_whole() {
    let up = Raw::start(|n, s| {
        if n == 1 {
            // Chunked, in three writes (a chunk split across two of them), with a trailer.
            let parts = ["{\"jsonr", "pc\":\"2.0\",\"id\":1,\"result\"", ":{}}\n"];
            let chunk = |p: &str| format!("{:x}\r\n{p}\r\n", p.len());
            let (a, b, c) = (chunk(parts[0]), chunk(parts[1]), chunk(parts[2]));
            s.write_all(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n").unwrap();
            s.write_all(&a.as_bytes()[..a.len() - 3]).unwrap();
            std::thread::sleep(Duration::from_millis(20));
            s.write_all(format!("{}{b}", &a[a.len() - 3..]).as_bytes())
                .unwrap();
            std::thread::sleep(Duration::from_millis(20));
            s.write_all(format!("{c}0\r\nx-trailer: 1\r\n\r\n").as_bytes())
                .unwrap();
            true
        } else {
            // No length: the body ends when the upstream closes.
            s.write_all(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{}}").unwrap();
            false
        }
    });
    let gw = gateway(&up, "");
    let r = post(gw.mcp_addr, &refs(&call_headers("t")), &call(1, "t"));
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.text(), "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n");
    let r = post(gw.mcp_addr, &refs(&call_headers("t")), &call(2, "t"));
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["id"], 2);
    // The client gets it chunked (its connection outlives the response), as pingora's own
    // HTTP/1.1 proxy sends it.
    assert_eq!(r.header("transfer-encoding"), Some("chunked"));
    // The chunked answer left its connection reusable; the second request used it.
    assert_eq!(up.accepted.load(Ordering::SeqCst), 1);
}

#[test]
fn an_sse_answer_is_forwarded_event_by_event() {
    let release = Arc::new(Mutex::new(false));
    let r2 = release.clone();
    let up = Raw::start(move |_, s| {
        s.write_all(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n").unwrap();
        let ev = b"data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":1,\"progress\":1}}\n\n";
        s.write_all(format!("{:x}\r\n", ev.len()).as_bytes())
            .unwrap();
        s.write_all(ev).unwrap();
        s.write_all(b"\r\n").unwrap();
        // The final answer only once the client has the first event.
        for _ in 0..500 {
            if *r2.lock().unwrap() {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let done = b"data: {\"jsonrpc\":\"2.0\",\"id\":9,\"result\":{}}\n\n";
        s.write_all(format!("{:x}\r\n", done.len()).as_bytes())
            .unwrap();
        s.write_all(done).unwrap();
        s.write_all(b"\r\n0\r\n\r\n").unwrap();
        true
    });
    let gw = gateway(&up, "");
    let mut sse =
        support::http::SseStream::open(gw.mcp_addr, &refs(&call_headers("t")), &call(9, "t"));
    let first = sse.next_message().expect("the first event");
    assert_eq!(first["method"], "notifications/progress");
    *release.lock().unwrap() = true;
    let last = sse.next_message().expect("the answer");
    assert_eq!(last["id"], 9);
}

#[test]
fn an_upstream_that_dies_mid_body_is_counted_as_the_upstreams_failure() {
    dies_mid_body("");
}

#[test]
fn inside_pingoras_pipe_too_an_upstream_dying_mid_body_is_the_upstreams_failure() {
    dies_mid_body(IN_PINGORAS_PIPE);
}

fn dies_mid_body(extra: &str) {
    let up = Raw::start(|_, s| {
        s.write_all(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"jsonrpc\":").unwrap();
        false
    });
    let gw = gateway(&up, extra);
    let mut c = TcpStream::connect(gw.mcp_addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let req = post_bytes(&refs(&call_headers("t")), call(1, "t").as_bytes());
    c.write_all(&req).unwrap();
    let mut got = Vec::new();
    // The gateway closes the client connection once the upstream's body is cut short.
    let _ = c.read_to_end(&mut got);
    let text = String::from_utf8_lossy(&got);
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(
        !text.ends_with('}'),
        "a truncated body is not completed: {text}"
    );
    let m = support::metrics::scrape(&gw);
    assert!(
        support::metrics::sample(&m, "mcp_edge_upstream_errors_total", &[]) >= 1.0,
        "{m}"
    );
    assert_eq!(up.seen().len(), 1, "never re-sent");
}

#[test]
fn a_sampled_out_body_with_a_length_streams_through_the_same_leg() {
    let up = Raw::start(|n, s| {
        ok_json(s, n);
        true
    });
    let gw = gateway(&up, "validation: { sample: 0.0 }\n");
    for i in 1..=10u64 {
        let r = post(gw.mcp_addr, &refs(&call_headers("t")), &call(i, "t"));
        assert_eq!(r.status, 200, "{}", r.text());
    }
    let seen = up.seen();
    assert_eq!(seen.len(), 10);
    for (i, s) in seen.iter().enumerate() {
        assert_eq!(
            s.body,
            call(i as u64 + 1, "t").as_bytes(),
            "the body unchanged"
        );
        // The client sent head and body together: they leave together.
        assert_eq!(s.first_read, s.whole, "request {i}");
    }
    assert_eq!(up.accepted.load(Ordering::SeqCst), 1);
}

#[test]
fn an_h2_request_leaves_as_http_1_1_with_a_host_and_a_length() {
    use support::tls::h2client::{connect_plain, exchange, request};
    let up = Raw::start(|n, s| {
        ok_json(s, n);
        true
    });
    let h2c = std::net::SocketAddr::from(([127, 0, 0, 1], free_port()));
    let y = format!(
        "work_stealing: true\nlisten:\n  mcp: 127.0.0.1:{}\n  extra: [ {{ address: {h2c}, h2c: true }} ]\n  admin: null\npools:\n  default:\n    instances: [{}]\n    health: {{ check: off }}\ndefault_route: {{ pool: default }}\n",
        free_port(),
        up.server.addr
    );
    let cfg = mcp_edge::config::Config::parse(&y, "h2.yaml").unwrap();
    let _gw = mcp_edge::gateway::RunningGateway::start(cfg).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut send = connect_plain(h2c).await;
        for id in 1..=3u64 {
            let body = call(id, "t");
            // With a declared length the body is read and checked before an instance is chosen,
            // and takes the gateway's leg (without one it is held: pingora's leg, chunked).
            let mut h = call_headers("t");
            h.push(("content-length", body.len().to_string()));
            let (status, _, answer) = exchange(
                &mut send,
                request("localhost:8443", "http", &refs(&h)),
                body.as_bytes(),
            )
            .await;
            assert_eq!(status, 200, "{}", String::from_utf8_lossy(&answer));
        }
    });
    let seen = up.seen();
    assert_eq!(seen.len(), 3, "{seen:#?}");
    for (i, s) in seen.iter().enumerate() {
        assert!(s.head.starts_with("post /mcp http/1.1\r\n"), "{}", s.head);
        assert!(s.head.contains("\r\nhost: localhost:8443"), "{}", s.head);
        let len = format!("\r\ncontent-length: {}", s.body.len());
        assert!(s.head.contains(&len), "{}", s.head);
        assert_eq!(s.body, call(i as u64 + 1, "t").as_bytes());
        assert_eq!(s.first_read, s.whole, "one write");
    }
}

#[test]
fn an_upstream_cannot_name_its_instance_or_claim_a_retry_landing() {
    for extra in ["", IN_PINGORAS_PIPE] {
        let up = Raw::start(|n, s| {
            let body = format!(r#"{{"jsonrpc":"2.0","id":{n},"result":{{"content":[]}}}}"#);
            let head = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Mcp-Edge-Upstream: evil\r\nX-Mcp-Edge-Retry-Landing: elsewhere\r\nx_mcp_edge_retry_landing: same\r\nContent-Length: {}\r\n\r\n",
                body.len()
            );
            s.write_all(head.as_bytes()).unwrap();
            s.write_all(body.as_bytes()).unwrap();
            true
        });
        let gw = gateway(&up, extra);
        let r = post(gw.mcp_addr, &refs(&call_headers("echo")), &call(1, "echo"));
        assert_eq!(r.status, 200, "{}", r.text());
        let real = up.server.addr.to_string();
        assert_eq!(
            r.header("x-mcp-edge-upstream"),
            Some(real.as_str()),
            "{extra}"
        );
        // Not a retry leg of a steering pool: the gateway says nothing, and nor may the upstream.
        assert!(r.header("x-mcp-edge-retry-landing").is_none(), "{extra}");
        assert!(r.header("x_mcp_edge_retry_landing").is_none(), "{extra}");
    }
}
