//! The gateway's own upstream HTTP/1.1 leg on the wire, against a raw upstream whose every byte
//! the test decides: one write per request, keep-alive reuse, an idle connection the upstream
//! closed, chunked / close-delimited / SSE responses, an upstream that dies mid-body, a client
//! that leaves mid-answer, a request never re-sent once written. Most run on the default,
//! `connections.upstream_leg: direct` (a checked body forwarded from the gateway's first
//! phase); the ones marked so run on `gateway` too (the same leg inside pingora's proxy pipe).
//! Everything on 127.0.0.1.

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use support::background::AcceptLoop;
use support::*;

/// One request as the upstream read it.
#[derive(Debug, Clone)]
struct Seen {
    /// Bytes the first `read` returned.
    first_read: usize,
    /// Bytes of the whole request (head and body).
    whole: usize,
    /// The request head, lower-cased.
    head: String,
    body: Vec<u8>,
}

/// Read one request (Content-Length framing); `None` when the connection ended first.
fn read_request(s: &mut TcpStream) -> Option<Seen> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 256 * 1024];
    let mut first_read = 0;
    loop {
        let n = s.read(&mut chunk).ok()?;
        if n == 0 {
            return None;
        }
        if first_read == 0 {
            first_read = n;
        }
        buf.extend_from_slice(&chunk[..n]);
        let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
            continue;
        };
        let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
        let len: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .map(|v| v.trim().parse().unwrap())
            .unwrap_or(0);
        if buf.len() >= end + 4 + len {
            return Some(Seen {
                first_read,
                whole: end + 4 + len,
                head,
                body: buf[end + 4..end + 4 + len].to_vec(),
            });
        }
    }
}

/// A raw upstream: for each request on a connection, `answer(request number, stream)` writes
/// the response; it returns whether to keep the connection.
struct Raw {
    server: AcceptLoop,
    seen: Arc<Mutex<Vec<Seen>>>,
    accepted: Arc<AtomicUsize>,
    /// Connections the upstream has closed (counted after the close).
    closed: Arc<AtomicUsize>,
}

impl Raw {
    fn start(answer: impl Fn(usize, &mut TcpStream) -> bool + Send + 'static) -> Raw {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let accepted = Arc::new(AtomicUsize::new(0));
        let closed = Arc::new(AtomicUsize::new(0));
        let (log, count, gone) = (seen.clone(), accepted.clone(), closed.clone());
        let server = AcceptLoop::start(move |mut s| {
            count.fetch_add(1, Ordering::SeqCst);
            while let Some(req) = read_request(&mut s) {
                let n = {
                    let mut l = log.lock().unwrap();
                    l.push(req);
                    l.len()
                };
                if !answer(n, &mut s) {
                    break;
                }
            }
            drop(s);
            gone.fetch_add(1, Ordering::SeqCst);
        });
        Raw {
            server,
            seen,
            accepted,
            closed,
        }
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

fn gateway(up: &Raw, extra: &str) -> mcp_edge::gateway::RunningGateway {
    mcp_edge::gateway::RunningGateway::start(gateway_config(up, extra)).unwrap()
}

fn gateway_config(up: &Raw, extra: &str) -> mcp_edge::config::Config {
    config(
        // No active health checks: every request the upstream sees is the test's.
        &[(
            "default",
            &[up.server.addr],
            "balance: round_robin\n    health: {check: off}",
        )],
        &format!("default_route: {{pool: default}}\n{extra}"),
    )
}

fn ok_json(s: &mut TcpStream, id: usize) {
    let body = format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{"content":[]}}}}"#);
    let head = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(body.as_bytes()).unwrap();
}

/// The setting that keeps the own leg inside pingora's proxy pipe.
const IN_PINGORAS_PIPE: &str = "connections: { upstream_leg: gateway }\n";

#[test]
fn each_request_reaches_the_upstream_in_one_write_over_one_reused_connection() {
    one_write_per_request_over_one_connection("");
}

#[test]
fn inside_pingoras_pipe_too_each_request_leaves_in_one_write_over_one_connection() {
    one_write_per_request_over_one_connection(IN_PINGORAS_PIPE);
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
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let mut b = [0u8; 64];
        if matches!(s.read(&mut b), Ok(0)) {
            seen_close.fetch_add(1, Ordering::SeqCst);
        }
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
