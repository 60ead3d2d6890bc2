//! Issue #13: hostile or broken clients. Each test is named after the behaviour it guards:
//! slow and partial requests, the body budget, idle keep-alive, pipelining and trailing bytes,
//! label floods, refusals cheaper than successes, reload and shutdown under abuse, DNS changes,
//! legacy clients. Loopback only; every wait is bounded.

mod support;

use std::io::{BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use mcp_edge::config::Config;
use mcp_edge::gateway::{dns, Gateway, Live};
use support::*;

fn head_for(body_len: usize, extra: &[(&str, String)]) -> Vec<u8> {
    let mut req =
        format!("POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {body_len}\r\n");
    for (k, v) in call_headers("get_weather").iter().chain(extra) {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.into_bytes()
}

fn read_one(s: &TcpStream) -> support::http::Reply {
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    support::http::read_reply(&mut BufReader::new(s)).expect("a response")
}

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
    let idle_since = Instant::now();
    let mut buf = [0u8; 16];
    let n = r.read(&mut buf).unwrap_or(0);
    assert_eq!(
        n, 0,
        "the idle connection got bytes instead of being closed"
    );
    let idle = idle_since.elapsed();
    assert!(
        idle >= Duration::from_millis(800) && idle < Duration::from_secs(5),
        "{idle:?}"
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

#[test]
fn i13_2_pipelined_requests_are_answered_in_order() {
    let up = Upstreams::start(1);
    let gw = simple_gateway(&up, "");
    let (a, b) = (call(1, "get_weather"), call(2, "get_weather"));
    let mut both = head_for(a.len(), &[]);
    both.extend_from_slice(a.as_bytes());
    both.extend_from_slice(&head_for(b.len(), &[]));
    both.extend_from_slice(b.as_bytes());
    let s = TcpStream::connect(gw.mcp_addr).unwrap();
    (&s).write_all(&both).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut r = BufReader::new(s);
    let first = support::http::read_reply(&mut r).unwrap();
    let second = support::http::read_reply(&mut r).unwrap();
    assert_eq!((first.status, first.json()["id"].clone()), (200, 1.into()));
    assert_eq!(
        (second.status, second.json()["id"].clone()),
        (200, 2.into())
    );
}

#[test]
fn i13_2_bytes_after_a_request_never_blame_an_instance() {
    let up = Upstreams::start(1);
    // The trailing bytes read as the start of a head that never ends: 408 at the head deadline.
    let gw = simple_gateway(&up, "timeouts: { request_head: 1s }\n");
    let a = call(1, "get_weather");
    let mut req = head_for(a.len(), &[]);
    req.extend_from_slice(a.as_bytes());
    req.extend_from_slice(&vec![b'x'; 4096]);
    let s = TcpStream::connect(gw.mcp_addr).unwrap();
    (&s).write_all(&req).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut r = BufReader::new(s);
    let first = support::http::read_reply(&mut r).unwrap();
    assert_eq!(first.status, 200, "{}", first.text());
    // Whatever follows answers the garbage as the client's (or closes); never a 502.
    if let Ok(next) = support::http::read_reply(&mut r) {
        assert!(
            matches!(next.status, 400 | 408 | 431),
            "{} {}",
            next.status,
            next.text()
        );
    }
}

#[test]
fn i13_4_a_flood_of_refused_names_cannot_push_real_tools_into_other() {
    let up = Upstreams::start(1);
    let gw = simple_gateway(&up, "metrics: { name_label_limit: 5 }\n");
    for i in 0..50 {
        // The headers claim a junk name the body does not carry: refused, no label place.
        let h = call_headers(&format!("junk_{i}"));
        assert_eq!(
            post(gw.mcp_addr, &refs(&h), &call(1, "get_weather")).status,
            400
        );
    }
    let h = call_headers("get_weather");
    assert_eq!(
        post(gw.mcp_addr, &refs(&h), &call(2, "get_weather")).status,
        200
    );
    // The metrics of a request are recorded just after its answer is sent: wait for them.
    let scrape = || {
        let r = raw(
            gw.admin_addr.unwrap(),
            b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n",
        );
        String::from_utf8(r.body).unwrap()
    };
    assert!(
        eventually(Duration::from_secs(5), || scrape()
            .contains("name=\"get_weather\"")),
        "get_weather lost its label"
    );
    assert!(!scrape().contains("junk_"), "a refused name took a label");
}

#[test]
fn i13_5_100_continue_is_not_sent_before_the_limits_refuse() {
    let up = Upstreams::start(1);
    let gw = simple_gateway(
        &up,
        "rate_limits:\n  - name: one\n    key: [method]\n    rate: 1/m\n    burst: 1\n",
    );
    let h = call_headers("get_weather");
    assert_eq!(
        post(gw.mcp_addr, &refs(&h), &call(1, "get_weather")).status,
        200
    );
    let body = call(2, "get_weather");
    let s = TcpStream::connect(gw.mcp_addr).unwrap();
    (&s).write_all(&head_for(body.len(), &[("Expect", "100-continue".into())]))
        .unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut first = String::new();
    let mut r = BufReader::new(s);
    std::io::BufRead::read_line(&mut r, &mut first).unwrap();
    assert!(
        first.starts_with("HTTP/1.1 429"),
        "got {first:?} before the refusal"
    );
}

#[test]
fn i13_5_a_refusal_reads_at_most_a_small_prefix_of_a_large_body() {
    let up = Upstreams::start(1);
    let cfg = config(
        &[("p", &up.addrs, "balance: round_robin")],
        "routes:\n  - match: { name: other }\n    pool: p\n",
    );
    let gw = mcp_edge::gateway::RunningGateway::start(cfg).unwrap();
    // A 500 KB body that matches no route: only the head and 10 KB are ever sent.
    let s = TcpStream::connect(gw.mcp_addr).unwrap();
    (&s).write_all(&head_for(500_000, &[])).unwrap();
    (&s).write_all(&[b' '; 10_000]).unwrap();
    let r = read_one(&s);
    assert_eq!((r.status, r.error_code()), (404, -32601), "{}", r.text());
    assert!(
        r.json().get("id").is_none(),
        "an id was read from a body that was not read"
    );
}

#[test]
fn i13_6_concurrent_reloads_let_the_newest_file_win() {
    let up = Upstreams::start(1);
    let path = std::env::temp_dir().join(format!(
        "mcp-edge-reload-{}-{}.yaml",
        std::process::id(),
        free_port()
    ));
    let version = |n: u32| {
        format!(
            "listen: {{ mcp: 127.0.0.1:1, admin: null }}\npools:\n  p{n}:\n    instances: [{}]\ndefault_route: {{ pool: p{n} }}\n",
            up.addrs[0]
        )
    };
    // Written whole and renamed into place, as an operator's deploy step does.
    let write = |n: u32| {
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, version(n)).unwrap();
        std::fs::rename(&tmp, &path).unwrap();
    };
    write(0);
    let first = Gateway::new(Config::load(&path).unwrap(), None).unwrap();
    let live = std::sync::Arc::new(Live::new(first, Some(path.clone())));
    for n in 1..=30 {
        let l = live.clone();
        let first = std::thread::spawn(move || l.reload_from_file());
        write(n);
        let l = live.clone();
        let second = std::thread::spawn(move || l.reload_from_file());
        first.join().unwrap().unwrap();
        second.join().unwrap().unwrap();
        let pools: Vec<String> = live.load().pools.iter().map(|p| p.name.clone()).collect();
        assert_eq!(
            pools,
            [format!("p{n}")],
            "an older file won the reload race"
        );
    }
    let _ = std::fs::remove_file(&path);
}

#[test]
fn i13_6_sigterm_on_an_idle_gateway_exits_at_once() {
    let up = Upstreams::start(1);
    let port = free_port();
    let path = std::env::temp_dir().join(format!(
        "mcp-edge-sigterm-{}-{port}.yaml",
        std::process::id()
    ));
    std::fs::write(
        &path,
        format!(
            "listen: {{ mcp: 127.0.0.1:{port}, admin: null }}\npools:\n  p:\n    instances: [{}]\ndefault_route: {{ pool: p }}\nshutdown: {{ grace_period: 20s, wind_down: 1s }}\n",
            up.addrs[0]
        ),
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_mcp-edge"))
        .args(["serve", "--config"])
        .arg(&path)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let addr: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    assert!(eventually(Duration::from_secs(10), || TcpStream::connect(
        addr
    )
    .is_ok()));
    let h = call_headers("get_weather");
    assert_eq!(post(addr, &refs(&h), &call(1, "get_weather")).status, 200);
    let sent = Instant::now();
    Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    let exited = eventually(Duration::from_secs(8), || {
        child.try_wait().unwrap().is_some()
    });
    let took = sent.elapsed();
    if !exited {
        let _ = child.kill();
    }
    let _ = child.wait();
    let _ = std::fs::remove_file(&path);
    assert!(
        exited && took < Duration::from_secs(5),
        "idle gateway took {took:?} to stop (grace 20 s)"
    );
}

#[test]
fn i13_6_an_instance_that_resolves_elsewhere_is_picked_up() {
    let up = Upstreams::start(1);
    let port = up.addrs[0].port();
    let yaml = format!(
        "listen: {{ mcp: 127.0.0.1:1, admin: null }}\npools:\n  p:\n    instances: [\"localhost:{port}\"]\ndefault_route: {{ pool: p }}\n"
    );
    let cfg = Config::parse(&yaml, "dns.yaml").unwrap();
    let mut gw = Gateway::new(cfg, None).unwrap();
    // What the gateway had resolved before the name moved.
    let stale: std::net::SocketAddr = "127.0.0.2:9".parse().unwrap();
    gw.pools[0].instances[0].addr = stale;
    assert_eq!(dns::changes(&gw).len(), 1);
    let live = Live::new(gw, None);
    dns::refresh(&live);
    let now = live.load().pools[0].instances[0].addr;
    assert_ne!(now, stale);
    assert_eq!(now.port(), port);
    assert!(dns::changes(&live.load()).is_empty());
}

#[test]
fn i13_6_health_checks_every_zero_seconds_are_refused() {
    let yaml =
        "pools:\n  p:\n    instances: [127.0.0.1:1]\n    health: { check: tcp, interval: 0s }\n";
    let e = Config::parse(yaml, "gateway.yaml").unwrap_err().to_string();
    assert!(
        e.contains("gateway.yaml:4") && e.contains("interval"),
        "{e}"
    );
}

#[test]
fn i13_6_the_upgrade_socket_is_in_a_private_directory() {
    use std::os::unix::fs::PermissionsExt;
    let cfg = Config::parse("pools: { p: { instances: [127.0.0.1:1] } }\n", "g.yaml").unwrap();
    let sock = mcp_edge::gateway::server::upgrade_socket(&cfg);
    let dir = std::path::Path::new(&sock).parent().unwrap();
    let mode = std::fs::metadata(dir).unwrap().permissions().mode();
    assert_eq!(
        mode & 0o077,
        0,
        "{} is open to others ({mode:o})",
        dir.display()
    );
}

#[test]
fn i13_7_a_2025_initialize_learns_the_supported_versions() {
    let up = Upstreams::start(1);
    let gw = simple_gateway(&up, "");
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"old","version":"1"}}}"#;
    let r = post(gw.mcp_addr, &[("Content-Type", "application/json")], body);
    assert_eq!((r.status, r.error_code()), (400, -32022), "{}", r.text());
    let data = &r.json()["error"]["data"];
    assert_eq!(data["supported"], serde_json::json!(["2026-07-28"]));
    assert_eq!(data["requested"], "2025-11-25");
    assert_eq!(r.json()["id"], 1);
    assert_eq!(up.count(), 0);
}
