//! Slow and partial requests: the head and body deadlines, idle keep-alive, the body budget.

use super::*;

#[test]
fn i13_1_a_client_that_stops_mid_body_is_answered_as_the_clients_fault() {
    let up = Upstreams::start(1);
    let gw = simple_gateway(&up, "timeouts: { downstream_read: 500ms }\n");
    let body = call(1, "get_weather");
    let s = TcpStream::connect(gw.mcp_addr).unwrap();
    (&s).write_all(&head_for(body.len(), &[])).unwrap();
    (&s).write_all(&body.as_bytes()[..10]).unwrap();
    let r = read_one(&s);
    assert_eq!((r.status, r.error_code()), (400, -31005), "{}", r.text());
    assert_eq!(up.count(), 0);
    let m = String::from_utf8(
        raw(
            gw.admin_addr.unwrap(),
            b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n",
        )
        .body,
    )
    .unwrap();
    assert!(
        !m.contains("upstream-timeout"),
        "a client's stall was counted against an upstream"
    );
}

#[test]
fn i13_1_a_body_trickled_byte_by_byte_is_cut_at_the_body_deadline() {
    let up = Upstreams::start(1);
    let gw = simple_gateway(&up, "timeouts: { downstream_read: 5s, request_body: 1s }\n");
    let body = call(1, "get_weather");
    let s = TcpStream::connect(gw.mcp_addr).unwrap();
    (&s).write_all(&head_for(body.len(), &[])).unwrap();
    let started = Instant::now();
    let writer = s.try_clone().unwrap();
    let bytes = body.clone().into_bytes();
    let trickle = std::thread::spawn(move || {
        for b in bytes.iter().take(40) {
            if (&writer).write_all(&[*b]).is_err() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    });
    let r = read_one(&s);
    assert_eq!((r.status, r.error_code()), (408, -31005), "{}", r.text());
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(up.count(), 0);
    let _ = trickle.join();
}

/// Requests answered 408 / -31005 (the client's fault), as the metrics count them.
fn incomplete_requests(m: &str) -> f64 {
    sample(
        m,
        "mcp_edge_requests_total",
        &["code=\"-31005\"", "status=\"4xx\""],
    )
}

#[test]
fn i13_1_a_request_head_trickled_byte_by_byte_is_cut_at_the_head_deadline() {
    // Each byte comes well within pingora's per-read timeout, so only a deadline for the whole
    // head can stop this client.
    let up = Upstreams::start(1);
    let gw = simple_gateway(&up, "timeouts: { request_head: 1s }\n");
    let body = call(1, "get_weather");
    let head = head_for(body.len(), &[]);
    let s = TcpStream::connect(gw.mcp_addr).unwrap();
    let started = Instant::now();
    let writer = s.try_clone().unwrap();
    let trickle = std::thread::spawn(move || {
        for b in head.iter().take(60) {
            if (&writer).write_all(&[*b]).is_err() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    });
    let r = read_one(&s);
    assert_eq!((r.status, r.error_code()), (408, -31005), "{}", r.text());
    assert!(r.text().contains("timeouts.request_head"), "{}", r.text());
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_secs(5),
        "{took:?}"
    );
    let _ = trickle.join();
    assert_eq!(up.count(), 0);
    assert_eq!(incomplete_requests(&scrape(&gw)), 1.0);
}

#[test]
fn i13_1_a_client_that_connects_and_sends_nothing_gets_408_at_the_head_deadline() {
    let up = Upstreams::start(1);
    let gw = simple_gateway(&up, "timeouts: { request_head: 1s }\n");
    let s = TcpStream::connect(gw.mcp_addr).unwrap();
    let started = Instant::now();
    let r = read_one(&s);
    assert_eq!((r.status, r.error_code()), (408, -31005), "{}", r.text());
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    // The connection is closed after the answer.
    let mut rest = Vec::new();
    let _ = (&s).read_to_end(&mut rest);
    assert!(rest.is_empty(), "{}", String::from_utf8_lossy(&rest));
}

#[test]
fn i13_1_the_head_deadline_counts_from_each_requests_first_byte_not_from_idle_time() {
    let up = Upstreams::start(1);
    let gw = simple_gateway(&up, "timeouts: { request_head: 500ms }\n");
    let s = TcpStream::connect(gw.mcp_addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut r = BufReader::new(s.try_clone().unwrap());
    for id in 1..=2 {
        let body = call(id, "get_weather");
        (&s).write_all(&head_for(body.len(), &[])).unwrap();
        (&s).write_all(body.as_bytes()).unwrap();
        let reply = support::http::read_reply(&mut r).unwrap();
        assert_eq!((reply.status, reply.json()["id"].clone()), (200, id.into()));
        // Idle for longer than the head deadline: keep-alive idleness is `client_idle`'s.
        std::thread::sleep(Duration::from_millis(900));
    }
    // A third request whose head stops half way is cut.
    let head = head_for(10, &[]);
    (&s).write_all(&head[..head.len() / 2]).unwrap();
    let reply = support::http::read_reply(&mut r).unwrap();
    assert_eq!(
        (reply.status, reply.error_code()),
        (408, -31005),
        "{}",
        reply.text()
    );
    assert_eq!(up.count(), 2);
}

#[test]
fn i13_1_a_body_after_100_continue_is_under_the_body_deadline_not_the_head_deadline() {
    let up = Upstreams::start(1);
    let gw = simple_gateway(
        &up,
        "timeouts: { request_head: 500ms, request_body: 10s }\n",
    );
    let body = call(1, "get_weather");
    let s = TcpStream::connect(gw.mcp_addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    (&s).write_all(&head_for(body.len(), &[("Expect", "100-continue".into())]))
        .unwrap();
    let mut r = BufReader::new(s.try_clone().unwrap());
    let mut line = String::new();
    std::io::BufRead::read_line(&mut r, &mut line).unwrap();
    assert!(line.starts_with("HTTP/1.1 100"), "{line:?}");
    let mut blank = String::new();
    std::io::BufRead::read_line(&mut r, &mut blank).unwrap();
    // The body arrives in four parts over about 1.2 s, more than the head deadline.
    for part in body.as_bytes().chunks(body.len().div_ceil(4)) {
        std::thread::sleep(Duration::from_millis(300));
        (&s).write_all(part).unwrap();
    }
    let reply = support::http::read_reply(&mut r).unwrap();
    assert_eq!(reply.status, 200, "{}", reply.text());
}

#[test]
fn i13_1_an_idle_keep_alive_connection_is_closed_after_client_idle() {
    let up = Upstreams::start(1);
    let gw = simple_gateway(&up, "timeouts: { client_idle: 1s }\n");
    let body = call(1, "get_weather");
    let mut s = TcpStream::connect(gw.mcp_addr).unwrap();
    s.write_all(&head_for(body.len(), &[])).unwrap();
    s.write_all(body.as_bytes()).unwrap();
    let mut r = BufReader::new(s.try_clone().unwrap());
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let first = support::http::read_reply(&mut r).unwrap();
    assert_eq!(first.status, 200);
    support::http::assert_closed_when_idle(
        &mut r,
        Duration::from_millis(800),
        Duration::from_secs(5),
    );
}

#[test]
fn i13_1_slow_uploads_cannot_hold_more_than_the_body_budget() {
    let up = Upstreams::start(1);
    let gw = simple_gateway(
        &up,
        "limits: { max_held_bytes: 1000 }\ntimeouts: { downstream_read: 5s }\n",
    );
    // One upload holds 900 bytes and stalls.
    let big = format!("{}{}", " ".repeat(900), call(1, "get_weather"));
    let slow = TcpStream::connect(gw.mcp_addr).unwrap();
    (&slow).write_all(&head_for(big.len(), &[])).unwrap();
    (&slow).write_all(&big.as_bytes()[..900]).unwrap();
    // Wait until the gateway holds them (the gateway runs in this process).
    let held = || gw.current().held.load(std::sync::atomic::Ordering::Relaxed);
    assert!(
        eventually(Duration::from_secs(5), || held() >= 900),
        "held {}",
        held()
    );
    // A second body of 300 bytes is then over budget.
    let body = format!(
        "{}{}",
        " ".repeat(300 - call(2, "get_weather").len().min(300)),
        call(2, "get_weather")
    );
    let h = call_headers("get_weather");
    let r = post(gw.mcp_addr, &refs(&h), &body);
    assert_eq!((r.status, r.error_code()), (503, -31007), "{}", r.text());
    assert_eq!(r.header("retry-after"), Some("1"));
    // Once the slow upload is gone, the budget is free again.
    drop(slow);
    assert!(eventually(Duration::from_secs(5), || post(
        gw.mcp_addr,
        &refs(&h),
        &body
    )
    .status
        == 200));
}
