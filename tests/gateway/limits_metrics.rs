//! Rate limits and metrics over real sockets: quota + burst pass then 429 with Retry-After and a
//! JSON-RPC body, keys isolate, dry runs count without refusing, and `/metrics` counts what was
//! sent with bounded labels (checked by promtool: skipped loudly when it is not installed).

use crate::support;
use crate::support::*;
use std::collections::HashSet;

/// Scrape once `expected` requests have been recorded (metrics are recorded in the logging
/// phase, just after the response went out, so a scrape can overtake the last request).
fn settled(gw: &mcp_edge::gateway::RunningGateway, expected: f64) -> String {
    let mut text = String::new();
    // A request is counted, then timed, then its sizes observed: a scrape between those saw 8
    // requests of `lookup` counted and 7 timed once in CI. Settled is when the last of them,
    // the response's size, has every request too.
    let done = eventually(std::time::Duration::from_secs(3), || {
        text = scrape(gw);
        let all = |name| sample(&text, name, &[]) >= expected;
        all("mcp_edge_requests_total") && all("mcp_edge_response_body_bytes_count")
    });
    assert!(done, "expected {expected} requests recorded:\n{text}");
    text
}

/// The value of the sample whose name and labels contain every `parts` string.
fn with_auth(name: &str, user: &str) -> Vec<(&'static str, String)> {
    let mut h = call_headers(name);
    h.push(("Authorization", format!("Bearer {user}")));
    h
}

#[test]
fn quota_plus_burst_pass_then_429_with_retry_after_and_keys_isolate() {
    let up = Upstreams::start(1);
    let gw = simple_gateway(
        &up,
        "rate_limits:\n  - name: per-tool-per-caller\n    match: {method: tools/call}\n    key: [name, principal]\n    rate: 1/m\n    burst: 3\n",
    );
    for i in 0..3 {
        let r = post(
            gw.mcp_addr,
            &refs(&with_auth("deploy", "alice")),
            &call(i, "deploy"),
        );
        assert_eq!(r.status, 200, "request {i} is within the burst");
    }
    let before = up.count();
    let r = post(
        gw.mcp_addr,
        &refs(&with_auth("deploy", "alice")),
        &call(42, "deploy"),
    );
    assert_eq!(r.status, 429);
    assert_eq!(r.error_code(), -31001);
    assert_eq!(r.json()["id"], 42, "the id is echoed");
    assert_eq!(r.json()["error"]["data"]["limit"], "per-tool-per-caller");
    let retry: u64 = r.header("retry-after").unwrap().parse().unwrap();
    assert!((1..=60).contains(&retry), "Retry-After {retry}");
    assert_eq!(up.count(), before, "the upstream is never contacted");
    // Another caller and another tool have their own buckets.
    assert_eq!(
        post(
            gw.mcp_addr,
            &refs(&with_auth("deploy", "bob")),
            &call(1, "deploy")
        )
        .status,
        200
    );
    assert_eq!(
        post(
            gw.mcp_addr,
            &refs(&with_auth("lookup", "alice")),
            &call(1, "lookup")
        )
        .status,
        200
    );
    let m = settled(&gw, 6.0);
    assert_eq!(
        sample(
            &m,
            "mcp_edge_rate_limit_decisions_total",
            &["per-tool-per-caller", "\"limited\""]
        ),
        1.0
    );
    assert_eq!(
        sample(
            &m,
            "mcp_edge_rate_limit_decisions_total",
            &["per-tool-per-caller", "\"allowed\""]
        ),
        5.0
    );
    assert_eq!(
        sample(
            &m,
            "mcp_edge_requests_total",
            &["code=\"-31001\"", "status=\"4xx\""]
        ),
        1.0
    );
}

#[test]
fn dry_run_counts_but_never_refuses() {
    let up = Upstreams::start(1);
    let gw = simple_gateway(
        &up,
        "rate_limits:\n  - {name: shadow, key: [principal], rate: 1/h, burst: 1, dry_run: true}\n",
    );
    for i in 0..5 {
        assert_eq!(
            post(gw.mcp_addr, &refs(&with_auth("t", "alice")), &call(i, "t")).status,
            200
        );
    }
    let m = settled(&gw, 5.0);
    assert_eq!(
        sample(
            &m,
            "mcp_edge_rate_limit_decisions_total",
            &["shadow", "dry_run_limited"]
        ),
        4.0
    );
    assert_eq!(up.count(), 5);
}

#[test]
fn metrics_count_a_known_mix_of_requests() {
    let up = Upstreams::start(2);
    let gw = simple_gateway(
        &up,
        "routes:\n  - {name: calls, match: {method: tools/call}, pool: default}\n",
    );
    for i in 0..7 {
        assert_eq!(
            post(
                gw.mcp_addr,
                &refs(&call_headers("lookup")),
                &call(i, "lookup")
            )
            .status,
            200
        );
    }
    // Three mismatches, one retry leg, one parse error.
    for i in 0..3 {
        assert_eq!(
            post(
                gw.mcp_addr,
                &refs(&call_headers("claimed")),
                &call(i, "actual")
            )
            .status,
            400
        );
    }
    let retry = format!(
        r#"{{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{{"name":"lookup","arguments":{{}},"inputResponses":{{"k":{{"action":"accept"}}}},"requestState":"s",{META}}}}}"#
    );
    assert_eq!(
        post(gw.mcp_addr, &refs(&call_headers("lookup")), &retry).status,
        200
    );
    assert_eq!(
        post(gw.mcp_addr, &refs(&call_headers("lookup")), "{oops").status,
        400
    );
    let m = settled(&gw, 12.0);
    let ok = sample(
        &m,
        "mcp_edge_requests_total",
        &[
            "method=\"tools/call\"",
            "name=\"lookup\"",
            "route=\"calls\"",
            "status=\"2xx\"",
        ],
    );
    assert_eq!(ok, 8.0, "{m}");
    assert_eq!(
        sample(&m, "mcp_edge_requests_total", &["code=\"-32020\""]),
        3.0
    );
    assert_eq!(
        sample(&m, "mcp_edge_requests_total", &["code=\"-32700\""]),
        1.0
    );
    assert_eq!(
        sample(&m, "mcp_edge_header_checks_total", &["result=\"checked\""]),
        8.0
    );
    assert_eq!(
        sample(&m, "mcp_edge_header_checks_total", &["mcp-name-mismatch"]),
        3.0
    );
    assert_eq!(
        sample(&m, "mcp_edge_mrtr_retry_legs_total", &["name=\"lookup\""]),
        1.0
    );
    // Every request claiming `lookup` is timed, the refused parse error included.
    assert_eq!(
        sample(
            &m,
            "mcp_edge_request_duration_seconds_count",
            &["name=\"lookup\""]
        ),
        9.0
    );
    assert_eq!(sample(&m, "mcp_edge_upstream_requests_total", &[]), 8.0);
    assert_eq!(sample(&m, "mcp_edge_upstream_in_flight_requests", &[]), 0.0);
    let per_instance: Vec<f64> = up
        .addrs
        .iter()
        .map(|a| {
            sample(
                &m,
                "mcp_edge_upstream_requests_total",
                &[&format!("upstream=\"{a}\"")],
            )
        })
        .collect();
    // Refused requests took their round-robin turn too, so the split need not be even.
    assert_eq!(per_instance.iter().sum::<f64>(), 8.0, "{per_instance:?}");
    assert!(per_instance.iter().all(|n| *n >= 1.0), "{per_instance:?}");
}

#[test]
fn the_name_label_is_bounded() {
    let up = Upstreams::start(1);
    let gw = simple_gateway(
        &up,
        "metrics:\n  name_label_limit: 20\nroutes:\n  - {match: {name: pinned_tool}, pool: default}\n",
    );
    for i in 0..300 {
        let n = format!("tool_{i}");
        assert_eq!(
            post(gw.mcp_addr, &refs(&call_headers(&n)), &call(i, &n)).status,
            200
        );
    }
    let r = post(
        gw.mcp_addr,
        &refs(&call_headers("pinned_tool")),
        &call(1, "pinned_tool"),
    );
    assert_eq!(r.status, 200, "{:?}", String::from_utf8_lossy(&r.body));
    let m = settled(&gw, 301.0);
    let names: HashSet<&str> = m
        .lines()
        .filter(|l| l.starts_with("mcp_edge_requests_total{"))
        .filter_map(|l| l.split("name=\"").nth(1).and_then(|r| r.split('"').next()))
        .collect();
    assert!(
        names.contains("_other") && names.contains("pinned_tool"),
        "{names:?}"
    );
    assert!(names.len() <= 22, "{} name values: {names:?}", names.len());
    assert_eq!(
        sample(&m, "mcp_edge_requests_total", &["name=\"_other\""]),
        280.0
    );
}

#[test]
fn an_input_required_result_is_counted() {
    // A tiny upstream that always answers input_required, in two chunks split mid-token.
    use std::io::{Read, Write};
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let t = std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        let mut buf = [0u8; 65536];
        let mut got = Vec::new();
        while !got.windows(4).any(|w| w == b"\r\n\r\n") || !got.ends_with(b"}}}") {
            let n = s.read(&mut buf).unwrap();
            if n == 0 {
                break;
            }
            got.extend_from_slice(&buf[..n]);
        }
        let body = r#"{"jsonrpc":"2.0","id":1,"result":{"resultType":"input_required","requestState":"x"}}"#;
        let (a, b) = body.split_at(40);
        write!(s, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n{a}\r\n", a.len()).unwrap();
        s.flush().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(50));
        write!(s, "{:x}\r\n{b}\r\n0\r\n\r\n", b.len()).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(200));
    });
    // A one-connection upstream: no health checks, they would take its only accept.
    let cfg = config(
        &[(
            "default",
            &[addr],
            "balance: round_robin\n    health: {check: off}",
        )],
        "default_route: {pool: default}\n",
    );
    let gw = mcp_edge::gateway::RunningGateway::start(cfg).unwrap();
    let r = post(
        gw.mcp_addr,
        &refs(&call_headers("create_repo")),
        &call(1, "create_repo"),
    );
    assert_eq!(r.json()["result"]["resultType"], "input_required");
    t.join().unwrap();
    let m = settled(&gw, 1.0);
    assert_eq!(
        sample(
            &m,
            "mcp_edge_mrtr_input_required_total",
            &["name=\"create_repo\""]
        ),
        1.0,
        "{m}"
    );
}

#[test]
fn promtool_accepts_a_live_scrape() {
    if !support::programs::have(support::programs::PROMTOOL) {
        return;
    }
    let up = Upstreams::start(1);
    let gw = simple_gateway(
        &up,
        "rate_limits:\n  - {name: l, key: [name], rate: 100/s}\n",
    );
    for i in 0..5 {
        post(gw.mcp_addr, &refs(&call_headers("t")), &call(i, "t"));
    }
    post(gw.mcp_addr, &refs(&call_headers("x")), &call(1, "y"));
    let text = settled(&gw, 6.0);
    let mut child = std::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let msg = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && msg.trim().is_empty(),
        "promtool: {msg}"
    );
}

#[test]
fn header_only_requests_count_once_as_delivered_even_after_connect_retries() {
    let up = Upstreams::start(1);
    let dead = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let pool =
        "balance: round_robin\n    health: {check: off}\n    ejection: {consecutive_failures: 0}";
    let cfg = config(
        &[("default", &[dead, up.addrs[0]], pool)],
        "default_route: {pool: default}\nvalidation: {sample: 0.0}\n",
    );
    let gw = mcp_edge::gateway::RunningGateway::start(cfg).unwrap();
    for i in 0..4 {
        let r = post(gw.mcp_addr, &refs(&call_headers("t")), &call(i, "t"));
        assert_eq!(r.status, 200);
    }
    let m = settled(&gw, 4.0);
    // Half of them first tried the dead instance: still four deliveries, none to it.
    assert_eq!(
        sample(&m, "mcp_edge_upstream_requests_total", &[]),
        4.0,
        "{m}"
    );
    assert_eq!(up.count(), 4);
    assert_eq!(
        sample(&m, "mcp_edge_header_checks_total", &["skipped"]),
        4.0
    );
    assert!(sample(&m, "mcp_edge_upstream_errors_total", &["connect"]) >= 1.0);
}
