//! MRTR flows followed by the gateway, through the reference backend: multi-round flows give
//! the right round counts, waits and durations; flows left after their first leg are counted
//! as abandoned after `flows.timeout`; an error ends a flow as failed; the store stays within
//! `flows.max_tracked` under a flood of distinct states.

use crate::support;
use crate::support::http::call as mcp_call;
use crate::support::{config, eventually, sample, scrape};
use mcp_edge::backend::{Pool, PoolOptions};
use mcp_edge::gateway::RunningGateway;
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

fn gateway(pool: &Pool, extra: &str) -> RunningGateway {
    let cfg = config(
        &[("mrtr", pool.addrs(), "balance: round_robin")],
        &format!("default_route: {{pool: mrtr}}\n{extra}"),
    );
    RunningGateway::start(cfg).unwrap()
}

fn elicit() -> Value {
    json!({"elicitation": {}})
}

fn create_repo(gw: SocketAddr, id: i64, user: &str, extra: Value) -> Value {
    let r = mcp_call(
        gw,
        id,
        "create_repo",
        json!({"repo": "demo"}),
        elicit(),
        Some(user),
        extra,
    );
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()
}

fn answer(key: &str, content: Value, state: &Value) -> Value {
    json!({"inputResponses": {key: {"action": "accept", "content": content}}, "requestState": state})
}

fn deploy(gw: SocketAddr, id: i64, extra: Value) -> Value {
    let mut params = json!({"name": "deploy", "arguments": {"service": "billing", "environment": "prod"}, "_meta": support::http::meta(elicit())});
    if let Value::Object(m) = extra {
        for (k, v) in m {
            params[k] = v;
        }
    }
    let headers = [
        ("Authorization", "Bearer alice"),
        ("Mcp-Param-Environment", "prod"),
    ];
    let r = support::http::rpc(gw, json!(id), "tools/call", params, &headers);
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()["result"].clone()
}

/// Wait until every request so far is recorded (metrics are written just after the response).
fn settled(gw: &RunningGateway, requests: f64) -> String {
    let mut text = String::new();
    let ok = eventually(Duration::from_secs(5), || {
        text = scrape(gw);
        sample(&text, "mcp_edge_requests_total", &[]) >= requests
    });
    assert!(ok, "{text}");
    text
}

#[test]
fn multi_round_flows_give_their_rounds_waits_and_durations() {
    let pool = Pool::start(PoolOptions::local(2)).unwrap();
    let gw = gateway(&pool, "");
    let think = Duration::from_millis(300);
    let started = Instant::now();
    // Two create_repo flows of two legs, each with a 300 ms think time.
    for f in 0..2 {
        let r1 = create_repo(gw.mcp_addr, 10 * f, "alice", json!({}))["result"].clone();
        assert_eq!(r1["resultType"], "input_required");
        std::thread::sleep(think);
        let state = &r1["requestState"];
        let r2 = create_repo(
            gw.mcp_addr,
            10 * f + 1,
            "alice",
            answer("github_login", json!({"name": "octocat"}), state),
        );
        assert_eq!(r2["result"]["resultType"], "complete", "{r2}");
    }
    // One deploy flow of three legs: a wrong confirmation is asked again, with a new state.
    let d1 = deploy(gw.mcp_addr, 100, json!({}));
    let d2 = deploy(
        gw.mcp_addr,
        101,
        answer(
            "confirm",
            json!({"confirmation": "nope"}),
            &d1["requestState"],
        ),
    );
    assert_eq!(d2["resultType"], "input_required");
    assert_ne!(d2["requestState"], d1["requestState"]);
    let d3 = deploy(
        gw.mcp_addr,
        102,
        answer(
            "confirm",
            json!({"confirmation": "billing"}),
            &d2["requestState"],
        ),
    );
    assert_eq!(d3["resultType"], "complete", "{d3}");
    let elapsed = started.elapsed().as_secs_f64();

    let m = settled(&gw, 7.0);
    let flows = |name: &str, outcome: &str| {
        sample(
            &m,
            "mcp_edge_mrtr_flows_total",
            &[
                &format!("name=\"{name}\""),
                &format!("outcome=\"{outcome}\""),
            ],
        )
    };
    assert_eq!(flows("create_repo", "completed"), 2.0, "{m}");
    assert_eq!(flows("deploy", "completed"), 1.0, "{m}");
    assert_eq!(
        flows("create_repo", "abandoned") + flows("create_repo", "failed"),
        0.0
    );
    let h = |metric: &str, name: &str, part: &str| {
        sample(
            &m,
            &format!("{metric}_{part}"),
            &[&format!("name=\"{name}\"")],
        )
    };
    assert_eq!(h("mcp_edge_mrtr_flow_rounds", "create_repo", "count"), 2.0);
    assert_eq!(h("mcp_edge_mrtr_flow_rounds", "create_repo", "sum"), 4.0);
    assert_eq!(h("mcp_edge_mrtr_flow_rounds", "deploy", "sum"), 3.0);
    // Waits between rounds: two for create_repo (each about the think time: the gateway stamps
    // an answer once it has written it, which may be a little after the client, already
    // thinking, read it; so a wait may fall short of it by that much), two for deploy.
    assert_eq!(
        h("mcp_edge_mrtr_round_wait_seconds", "create_repo", "count"),
        2.0
    );
    let waits = h("mcp_edge_mrtr_round_wait_seconds", "create_repo", "sum");
    assert!(waits >= 0.5 && waits < elapsed, "{waits}");
    assert_eq!(
        h("mcp_edge_mrtr_round_wait_seconds", "deploy", "count"),
        2.0
    );
    // A flow lasts at least its think time and no longer than the whole test.
    let durations = h("mcp_edge_mrtr_flow_duration_seconds", "create_repo", "sum");
    assert!(
        durations >= 0.6 && durations < elapsed,
        "{durations} vs {elapsed}"
    );
    // Every retry leg is placed: on the previous leg's instance or another one.
    let placed = sample(&m, "mcp_edge_mrtr_retry_leg_placement_total", &[]);
    assert_eq!(placed, 4.0, "{m}");
    assert!(
        sample(
            &m,
            "mcp_edge_mrtr_retry_leg_placement_total",
            &["instance=\"other\""]
        ) >= 1.0,
        "round robin over two instances moves some legs"
    );
    assert_eq!(sample(&m, "mcp_edge_mrtr_flows_tracked", &[]), 0.0);
}

#[test]
fn abandoned_flows_are_counted_after_the_timeout_and_errors_fail_a_flow() {
    let pool = Pool::start(PoolOptions::local(1)).unwrap();
    let gw = gateway(&pool, "flows:\n  timeout: 700ms\n");
    for i in 0..3 {
        let r = create_repo(gw.mcp_addr, i, "alice", json!({}));
        assert_eq!(r["result"]["resultType"], "input_required");
    }
    // Replayed by another user: the backend refuses the state, the flow fails.
    let r1 = create_repo(gw.mcp_addr, 10, "alice", json!({}))["result"].clone();
    let r = mcp_call(
        gw.mcp_addr,
        11,
        "create_repo",
        json!({"repo": "demo"}),
        elicit(),
        Some("bob"),
        answer("github_login", json!({"name": "x"}), &r1["requestState"]),
    );
    assert_eq!(r.code(), Some(-32602), "{}", r.text());
    let mut m = settled(&gw, 5.0);
    let outcome = |m: &str, o: &str| {
        sample(
            m,
            "mcp_edge_mrtr_flows_total",
            &[&format!("outcome=\"{o}\"")],
        )
    };
    // The request is counted before its flow, and the flow's end before the gauge of flows
    // followed: a scrape may fall between them, so wait for the three to agree.
    let agreed = eventually(Duration::from_secs(2), || {
        let tracked = sample(&m, "mcp_edge_mrtr_flows_tracked", &[]);
        let done = outcome(&m, "failed") == 1.0 && tracked == 3.0;
        if !done {
            m = scrape(&gw);
        }
        done
    });
    assert!(agreed, "{m}");
    assert_eq!(outcome(&m, "failed"), 1.0, "{m}");
    assert_eq!(outcome(&m, "abandoned"), 0.0, "not before the timeout");
    assert_eq!(sample(&m, "mcp_edge_mrtr_flows_tracked", &[]), 3.0);
    let mut m = String::new();
    let abandoned = eventually(Duration::from_secs(10), || {
        m = scrape(&gw);
        outcome(&m, "abandoned") == 3.0
    });
    assert!(abandoned, "{m}");
    assert_eq!(sample(&m, "mcp_edge_mrtr_flows_tracked", &[]), 0.0);
    // A late leg of an abandoned flow is a leg the gateway no longer follows.
    let late = &r1["requestState"];
    let _ = create_repo(
        gw.mcp_addr,
        12,
        "alice",
        answer("github_login", json!({"name": "x"}), late),
    );
    let m = settled(&gw, 6.0);
    assert_eq!(
        sample(&m, "mcp_edge_mrtr_untracked_legs_total", &[]),
        1.0,
        "{m}"
    );
}

#[test]
fn a_flood_of_distinct_states_never_grows_the_store_past_its_bound() {
    let pool = Pool::start(PoolOptions::local(1)).unwrap();
    let gw = gateway(&pool, "flows:\n  max_tracked: 50\n");
    let n = 200;
    for i in 0..n {
        let r = create_repo(gw.mcp_addr, i, "alice", json!({}));
        assert_eq!(r["result"]["resultType"], "input_required");
        let store = gw.current().flows.clone().unwrap();
        assert!(store.len() <= 50, "{} flows followed", store.len());
    }
    let m = settled(&gw, n as f64);
    assert_eq!(sample(&m, "mcp_edge_mrtr_flows_tracked", &[]), 50.0, "{m}");
    assert_eq!(
        sample(&m, "mcp_edge_mrtr_flows_evicted_total", &[]),
        (n - 50) as f64
    );
}

/// An upstream answering every request as an SSE stream: a progress notification, then the
/// response (input_required with a state until a request carries one, then complete).
fn sse_upstream(requests: usize) -> (SocketAddr, std::thread::JoinHandle<()>) {
    use std::io::{Read, Write};
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let t = std::thread::spawn(move || {
        for _ in 0..requests {
            let (mut s, _) = l.accept().unwrap();
            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            let mut got = Vec::new();
            let mut buf = [0u8; 65536];
            // Read the head and the Content-Length body.
            loop {
                let n = s.read(&mut buf).unwrap();
                got.extend_from_slice(&buf[..n]);
                let text = String::from_utf8_lossy(&got).to_string();
                if let Some((head, body)) = text.split_once("\r\n\r\n") {
                    let len: usize = head
                        .lines()
                        .find_map(|l| {
                            l.to_ascii_lowercase()
                                .strip_prefix("content-length:")
                                .map(|v| v.trim().parse().unwrap())
                        })
                        .unwrap();
                    if body.len() >= len || n == 0 {
                        break;
                    }
                }
            }
            let text = String::from_utf8_lossy(&got);
            let result = if text.contains("\"requestState\"") {
                r#"{"resultType":"complete","content":[{"type":"text","text":"done"}]}"#
            } else {
                r#"{"resultType":"input_required","inputRequests":{},"requestState":"sse-state-1"}"#
            };
            let events = format!(
                "event: message\ndata: {{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{{\"progress\":1}}}}\n\nevent: message\ndata: {{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{result}}}\n\n"
            );
            let (a, b) = events.split_at(events.len() / 2);
            write!(s, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n{:x}\r\n{a}\r\n", a.len()).unwrap();
            s.flush().unwrap();
            std::thread::sleep(Duration::from_millis(20));
            write!(s, "{:x}\r\n{b}\r\n0\r\n\r\n", b.len()).unwrap();
        }
    });
    (addr, t)
}

#[test]
fn flows_are_followed_through_sse_responses() {
    let (addr, t) = sse_upstream(2);
    // One accept per request: no health checks, they would take the accepts.
    let cfg = config(
        &[(
            "sse",
            &[addr],
            "balance: round_robin\n    health: {check: off}",
        )],
        "default_route: {pool: sse}\n",
    );
    let gw = RunningGateway::start(cfg).unwrap();
    let r1 = mcp_call(
        gw.mcp_addr,
        1,
        "streamer",
        json!({}),
        elicit(),
        None,
        json!({}),
    );
    assert_eq!(r1.status, 200);
    assert_eq!(
        r1.sse_messages().last().unwrap()["result"]["resultType"],
        "input_required"
    );
    let r2 = mcp_call(
        gw.mcp_addr,
        2,
        "streamer",
        json!({}),
        elicit(),
        None,
        json!({"requestState": "sse-state-1", "inputResponses": {}}),
    );
    assert_eq!(
        r2.sse_messages().last().unwrap()["result"]["resultType"],
        "complete"
    );
    t.join().unwrap();
    let m = settled(&gw, 2.0);
    assert_eq!(
        sample(
            &m,
            "mcp_edge_mrtr_flows_total",
            &["name=\"streamer\"", "outcome=\"completed\""]
        ),
        1.0,
        "{m}"
    );
    assert_eq!(
        sample(&m, "mcp_edge_mrtr_flow_rounds_sum", &["name=\"streamer\""]),
        2.0
    );
    assert_eq!(
        sample(
            &m,
            "mcp_edge_mrtr_input_required_total",
            &["name=\"streamer\""]
        ),
        1.0,
        "SSE input_required counted"
    );
}
