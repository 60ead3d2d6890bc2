//! An event stream that leaves pingora's request pipeline (`gateway::journey::detached`: on a parked
//! plain HTTP/1.1 connection, the rest of an SSE response runs without the pipeline's state), on
//! the wire against a raw upstream (`support::raw`): events arrive one by one as the upstream
//! sends them, the stream is counted when it ends, the client connection then serves its next
//! request (also one the client sent while the stream ran) and the upstream connection goes
//! back to the pool; a client that leaves closes the upstream request. An upstream that fails
//! mid-stream cuts the client's response short, on every leg (outside the pipeline, the direct
//! leg inside it, the own client in pingora's pipe, pingora's client): no last chunk, no error
//! body appended. Everything on 127.0.0.1.

use std::io::{BufRead, Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::support::http::{read_reply, SseStream};
use crate::support::raw::{gateway, ok_json, peer_has_read, Raw};
use crate::support::*;
use mcp_edge::gateway::journey::detached;

const HEAD: &[u8] =
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n";
const PROGRESS: &str = "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":1,\"progress\":1}}\n\n";

fn chunk(s: &mut TcpStream, data: &str) {
    s.write_all(format!("{:x}\r\n{data}\r\n", data.len()).as_bytes())
        .unwrap();
}

fn result_event(id: usize) -> String {
    format!("event: message\ndata: {{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{{\"content\":[]}}}}\n\n")
}

/// An upstream whose first answer is an event stream: a progress event, then (once the test
/// says so) the result and the end; every later request gets a JSON answer.
fn streaming_upstream() -> (Raw, mpsc::Sender<()>) {
    let (go, wait) = mpsc::channel::<()>();
    let wait = Mutex::new(wait);
    let up = Raw::start(move |n, s| {
        if n > 1 {
            ok_json(s, n);
            return true;
        }
        s.write_all(HEAD).unwrap();
        chunk(s, PROGRESS);
        let told = wait.lock().unwrap().recv_timeout(Duration::from_secs(20));
        told.expect("the test lets the stream go on");
        chunk(s, &result_event(n));
        s.write_all(b"0\r\n\r\n").unwrap();
        true
    });
    (up, go)
}

/// Read the blank line after the last chunk (`next_message` stops at the `0` line).
fn end_of_stream(conn: &mut impl BufRead) {
    let mut line = String::new();
    conn.read_line(&mut line).unwrap();
    assert_eq!(line, "\r\n", "the chunked body ends with an empty trailer");
}

/// A keep-alive `tools/call` (no `Connection: close`).
fn keep_alive_call(id: u64) -> Vec<u8> {
    post_bytes(&refs(&call_headers("t")), call(id, "t").as_bytes())
}

/// The first request of a connection, whose answer is the upstream's stream.
fn open(gw: &mcp_edge::gateway::RunningGateway) -> SseStream {
    SseStream::send(gw.mcp_addr, &keep_alive_call(1))
}

fn counted(gw: &mcp_edge::gateway::RunningGateway) -> f64 {
    let text = scrape(gw);
    sample(&text, "mcp_edge_requests_total", &["method=\"tools/call\""])
}

#[test]
fn an_event_stream_streams_outside_the_pipeline_and_the_connection_serves_the_next_request() {
    let (up, go) = streaming_upstream();
    let gw = gateway(&up, "");
    let before = detached::handed_over();
    let mut sse = open(&gw);
    assert_eq!(sse.status, 200);
    // The first event arrives while the upstream still holds the second back: unbuffered.
    let first = sse.next_message().expect("the progress event");
    assert_eq!(first["method"], "notifications/progress");
    assert!(
        detached::handed_over() > before,
        "the stream left the pipeline"
    );
    assert_eq!(counted(&gw), 0.0, "a stream is counted when it ends");
    go.send(()).unwrap();
    assert_eq!(sse.next_message().expect("the result")["id"], 1);
    assert!(sse.next_message().is_none(), "the stream ends");
    let conn = sse.connection();
    end_of_stream(conn);
    assert!(
        eventually(Duration::from_secs(5), || counted(&gw) == 1.0),
        "the stream was counted once it ended"
    );

    // The same client connection serves the next request, on the same upstream connection.
    let next = keep_alive_call(2);
    conn.get_mut().write_all(&next).unwrap();
    let r = read_reply(conn).unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["id"], 2);
    assert_eq!(
        up.accepted.load(Ordering::SeqCst),
        1,
        "the upstream connection was pooled"
    );
}

#[test]
fn a_request_pipelined_during_a_stream_is_answered_after_it() {
    let (up, go) = streaming_upstream();
    let gw = gateway(&up, "");
    let mut sse = open(&gw);
    assert_eq!(
        sse.next_message().unwrap()["method"],
        "notifications/progress"
    );
    // The client sends its next request before the stream has ended.
    let next = keep_alive_call(2);
    sse.connection().get_mut().write_all(&next).unwrap();
    // It is in the gateway's hands (read off the socket) before the stream goes on.
    assert!(
        eventually(Duration::from_secs(10), || peer_has_read(
            sse.connection().get_ref()
        )),
        "the gateway never read the pipelined request"
    );
    go.send(()).unwrap();
    assert_eq!(sse.next_message().unwrap()["id"], 1);
    assert!(sse.next_message().is_none());
    let conn = sse.connection();
    end_of_stream(conn);
    let r = read_reply(conn).unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        r.json()["id"],
        2,
        "the pipelined request, answered after the stream"
    );
}

#[test]
fn a_client_that_leaves_a_stream_closes_the_upstream_request() {
    let saw_close = Arc::new(AtomicUsize::new(0));
    let seen = saw_close.clone();
    let up = Raw::start(move |_, s| {
        s.write_all(HEAD).unwrap();
        chunk(s, PROGRESS);
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        if matches!(s.read(&mut [0u8; 64]), Ok(0)) {
            seen.fetch_add(1, Ordering::SeqCst);
        }
        false
    });
    let gw = gateway(&up, "");
    let before = detached::handed_over();
    let mut sse = open(&gw);
    assert_eq!(
        sse.next_message().unwrap()["method"],
        "notifications/progress"
    );
    assert!(
        detached::handed_over() > before,
        "the stream left the pipeline"
    );
    drop(sse);
    let closed = eventually(Duration::from_secs(10), || {
        saw_close.load(Ordering::SeqCst) == 1
    });
    assert!(
        closed,
        "the upstream connection closed when the client left"
    );
    assert!(
        eventually(Duration::from_secs(5), || counted(&gw) == 1.0),
        "the cut stream was counted"
    );
}

#[test]
fn an_upstream_that_fails_mid_stream_cuts_the_response_short() {
    // Outside the pipeline (parked, the default), the direct leg inside it (`park_idle:
    // false`), and pingora's pipe.
    for extra in [
        "",
        "connections: { park_idle: false }\n",
        "connections: { upstream_leg: pingora }\n",
    ] {
        cut_short(extra);
    }
}

fn cut_short(extra: &str) {
    let up = Raw::start(move |_, s| {
        s.write_all(HEAD).unwrap();
        chunk(s, PROGRESS);
        // A chunk announced and never finished, then the close.
        s.write_all(b"40\r\nevent: mess").unwrap();
        false
    });
    let gw = gateway(&up, extra);
    let mut c = TcpStream::connect(gw.mcp_addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    c.write_all(&keep_alive_call(1)).unwrap();
    let mut got = Vec::new();
    let read = c.read_to_end(&mut got);
    assert!(
        read.is_ok(),
        "the gateway closed the connection ({extra}): {read:?}"
    );
    let text = String::from_utf8_lossy(&got);
    assert!(text.contains("notifications/progress"), "{extra}: {text}");
    assert!(
        !text.ends_with("0\r\n\r\n"),
        "no last chunk: the client can tell the response is incomplete ({extra}): {text}"
    );
}
