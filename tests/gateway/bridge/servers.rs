//! Pools of 2025-era servers (`era: 2025-11-25`) behind the gateway, used by 2026 clients: the
//! official TypeScript SDK v2 client pinned to 2026-07-28 lists and calls every tool of servers
//! written with the TypeScript SDK v1 and the Python SDK 1.x (two instances each), their
//! mid-call questions (elicitation, sampling, roots; two in a row) answered through MRTR, on a
//! pool's own endpoint and through a federated endpoint that also holds a 2026 pool; the retry
//! legs sent to a second replica; forged, altered, other callers', other requests' and expired
//! states refused before any server; an abandoned call cancelled and its slot freed; a
//! restarted instance (its sessions lost) costing the client nothing.

use serde_json::{json, Value};
use std::time::Duration;

use super::{backend, modern_client, LegacyServer, ServerKind};
use crate::support::http::call;
use crate::support::{config, eventually, sample, scrape};
use mcp_edge::gateway::RunningGateway;

pub(super) const TS_CALLS: &str = "add={\"a\":2,\"b\":3};confirm_deploy={\"service\":\"billing\",\"environment\":\"prod\"};ask_model={\"question\":\"capital?\"};client_roots;ask_twice";

pub(super) fn pool_line(name: &str, servers: &[LegacyServer]) -> String {
    let list: Vec<String> = servers.iter().map(|s| s.addr.to_string()).collect();
    format!(
        "  {name}: {{ instances: [{}], era: 2025-11-25 }}\n",
        list.join(", ")
    )
}

pub(super) fn legacy_gateway(servers: &[LegacyServer], extra: &str) -> RunningGateway {
    let cfg = config(
        &[],
        &format!(
            "{}default_route: {{pool: ts}}\n{extra}",
            pool_line("ts", servers)
        ),
    );
    RunningGateway::start(cfg).unwrap()
}

/// A client's report of [`TS_CALLS`]: every call answered, its five questions asked of it.
pub(super) fn every_call_answered(out: &Value) {
    assert_eq!(out["ok"], true, "{out}");
    assert!(text(out, "add").starts_with("5 (from"), "{out}");
    assert!(
        text(out, "confirm_deploy").starts_with("deployed billing to prod"),
        "{out}"
    );
    assert_eq!(text(out, "ask_model"), "the model said: Paris");
    assert_eq!(text(out, "client_roots"), "roots: file:///work");
    assert_eq!(text(out, "ask_twice"), "Ada likes Ada");
    assert_eq!(out["asked"].as_array().unwrap().len(), 5, "{out}");
}

pub(super) fn text(out: &Value, tool: &str) -> String {
    out["results"][tool]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[test]
fn the_ts_v2_client_uses_sdk_v1_servers_on_their_pool_and_through_a_federated_endpoint() {
    if !ServerKind::TypeScriptV1.installed() || !ServerKind::PythonV1.installed() {
        return;
    }
    let ts = [
        LegacyServer::start(ServerKind::TypeScriptV1, 0),
        LegacyServer::start(ServerKind::TypeScriptV1, 0),
    ];
    let py = [
        LegacyServer::start(ServerKind::PythonV1, 0),
        LegacyServer::start(ServerKind::PythonV1, 0),
    ];
    let modern = backend();
    let extra = "federation:\n  endpoints:\n    - { path: /fed, pools: [ts, py, modern], collisions: prefix }\n";
    let cfg = config(
        &[("modern", modern.addrs(), "")],
        &format!(
            "{}{}default_route: {{pool: ts}}\n{extra}",
            pool_line("ts", &ts),
            pool_line("py", &py)
        ),
    );
    let gw = RunningGateway::start(cfg).unwrap();

    let Some(out) = modern_client(&format!("http://{}/mcp", gw.mcp_addr), TS_CALLS, None) else {
        return;
    };
    every_call_answered(&out);
    assert_eq!(out["server"]["name"], "legacy-ts-server");

    let calls = "ts__confirm_deploy={\"service\":\"api\",\"environment\":\"staging\"};py__confirm_deploy={\"service\":\"db\",\"environment\":\"prod\"};py__ask_model={\"question\":\"q\"};py__client_roots;modern__test_input_required_result_multiple_inputs";
    let out = modern_client(&format!("http://{}/fed", gw.mcp_addr), calls, None).unwrap();
    assert_eq!(out["ok"], true, "{out}");
    let tools: Vec<&str> = out["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    for t in ["ts__ask_twice", "py__client_roots", "modern__echo"] {
        assert!(tools.contains(&t), "{t} not in {tools:?}");
    }
    assert!(
        text(&out, "ts__confirm_deploy").starts_with("deployed api to staging"),
        "{out}"
    );
    assert!(
        text(&out, "py__confirm_deploy").starts_with("deployed db to prod (asked by py-v1-"),
        "{out}"
    );
    assert_eq!(text(&out, "py__ask_model"), "the model said: Paris");
    assert_eq!(text(&out, "py__client_roots"), "roots: file:///work");
    assert!(
        text(&out, "modern__test_input_required_result_multiple_inputs")
            .starts_with("Received all answers.")
    );
    let m = scrape(&gw);
    assert!(
        sample(&m, "mcp_edge_legacy_paused_calls_total", &["resumed"]) >= 9.0,
        "{m}"
    );
    assert_eq!(sample(&m, "mcp_edge_legacy_calls_paused", &[]), 0.0);
    // The console says what each pool speaks and what the bridge did with the servers.
    let admin = gw.admin_addr.unwrap();
    let s = crate::support::http::request(admin, "GET", "/-/console.json", &[], b"").json();
    let eras = &s["eras"];
    let era = |pool: &str| {
        let p = eras["pools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["pool"] == pool);
        p.map(|p| p["era"].clone()).unwrap_or_default()
    };
    assert_eq!(
        (era("ts"), era("py")),
        (json!("2025-11-25"), json!("2025-11-25")),
        "{eras}"
    );
    assert_eq!(era("modern"), json!("2026-07-28"), "{eras}");
    assert!(
        eras["legacy_servers"]["sessions_open"].as_i64() >= Some(2),
        "{eras}"
    );
    assert!(
        eras["legacy_servers"]["paused_calls"]["resumed"].as_f64() >= Some(9.0),
        "{eras}"
    );
}

#[test]
fn retries_sent_to_another_replica_resume_the_paused_call() {
    if !ServerKind::TypeScriptV1.installed() {
        return;
    }
    let ts = [
        LegacyServer::start(ServerKind::TypeScriptV1, 0),
        LegacyServer::start(ServerKind::TypeScriptV1, 0),
    ];
    let keys = std::env::temp_dir().join(format!("mcp-edge-legacy-keys-{}", std::process::id()));
    std::fs::write(
        &keys,
        format!(
            "{}\n",
            mcp_edge::mcp::hex::encode(&rand::random::<[u8; 32]>())
        ),
    )
    .unwrap();
    let extra = format!("legacy: {{ keys_file: {} }}\n", keys.display());
    let (a, b) = (legacy_gateway(&ts, &extra), legacy_gateway(&ts, &extra));
    let calls = "confirm_deploy={\"service\":\"billing\",\"environment\":\"prod\"};ask_twice";
    let Some(out) = modern_client(
        &format!("http://{}/mcp", a.mcp_addr),
        calls,
        Some(&format!("http://{}/mcp", b.mcp_addr)),
    ) else {
        return;
    };
    assert_eq!(out["ok"], true, "{out}");
    assert!(
        text(&out, "confirm_deploy").starts_with("deployed billing to prod"),
        "{out}"
    );
    assert_eq!(text(&out, "ask_twice"), "Ada likes Ada");
    assert_eq!(out["retriesElsewhere"], 3, "{out}");
    // Replica b sent each retry on to a, which holds the paused calls.
    assert_eq!(
        sample(
            &scrape(&a),
            "mcp_edge_legacy_paused_calls_total",
            &["resumed"]
        ),
        3.0
    );
    assert_eq!(
        sample(
            &scrape(&b),
            "mcp_edge_legacy_paused_calls_total",
            &["resumed"]
        ),
        0.0
    );
    let _ = std::fs::remove_file(&keys);
}

fn deploy(gw: std::net::SocketAddr, id: i64, user: &str, env: &str, extra: Value) -> Value {
    let r = call(
        gw,
        id,
        "confirm_deploy",
        json!({"service": "billing", "environment": env}),
        json!({"elicitation": {}}),
        Some(user),
        extra,
    );
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()
}

#[test]
fn forged_altered_foreign_and_replayed_states_never_reach_the_server() {
    if !ServerKind::TypeScriptV1.installed() {
        return;
    }
    let ts = [LegacyServer::start(ServerKind::TypeScriptV1, 0)];
    let gw = legacy_gateway(&ts, "");
    let a = gw.mcp_addr;
    let first = deploy(a, 1, "alice", "staging", json!({}));
    let r = &first["result"];
    assert_eq!(r["resultType"], "input_required", "{first}");
    let (key, q) = r["inputRequests"]
        .as_object()
        .unwrap()
        .iter()
        .next()
        .unwrap();
    assert_eq!(q["method"], "elicitation/create");
    let state = r["requestState"].as_str().unwrap().to_owned();
    let answer = |s: &str| json!({"inputResponses": {key: {"action": "accept", "content": {"confirm": true}}}, "requestState": s});

    let refused = |v: Value, why: &str| {
        assert_eq!(v["error"]["code"], -32602, "{v}");
        assert!(
            v["error"]["message"].as_str().unwrap().contains(why),
            "{why}: {v}"
        );
    };
    refused(
        deploy(a, 2, "mallory", "staging", answer(&state)),
        "another caller",
    );
    refused(
        deploy(a, 3, "alice", "production", answer(&state)),
        "another request",
    );
    let mut altered = state.clone().into_bytes();
    let i = altered.len() - 6;
    altered[i] = if altered[i] == b'A' { b'B' } else { b'A' };
    refused(
        deploy(
            a,
            4,
            "alice",
            "staging",
            answer(&String::from_utf8(altered).unwrap()),
        ),
        "integrity",
    );
    refused(
        deploy(a, 5, "alice", "staging", answer("eyJzdGVwIjoiY2hhcmdlIn0=")),
        "did not issue",
    );
    // Nothing of that reached the server: the paused call is still there, and completes.
    let done = deploy(a, 6, "alice", "staging", answer(&state));
    assert_eq!(
        done["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .split(" (")
            .next(),
        Some("deployed billing to staging"),
        "{done}"
    );
    assert_eq!(done["result"]["resultType"], "complete");
    refused(
        deploy(a, 7, "alice", "staging", answer(&state)),
        "no longer held",
    );
}

#[test]
fn an_abandoned_call_is_cancelled_at_the_server_and_its_slot_freed() {
    if !ServerKind::TypeScriptV1.installed() {
        return;
    }
    let ts = [LegacyServer::start(ServerKind::TypeScriptV1, 0)];
    let gw = legacy_gateway(&ts, "legacy: { answer_timeout: 300ms }\n");
    let first = deploy(gw.mcp_addr, 1, "alice", "staging", json!({}));
    assert_eq!(first["result"]["resultType"], "input_required", "{first}");
    assert_eq!(
        sample(&scrape(&gw), "mcp_edge_legacy_calls_paused", &[]),
        1.0
    );
    assert!(eventually(Duration::from_secs(5), || sample(
        &scrape(&gw),
        "mcp_edge_legacy_paused_calls_total",
        &["timed_out"]
    ) == 1.0));
    assert_eq!(
        sample(&scrape(&gw), "mcp_edge_legacy_calls_paused", &[]),
        0.0
    );
    let state = first["result"]["requestState"].as_str().unwrap();
    let late = deploy(
        gw.mcp_addr,
        2,
        "alice",
        "staging",
        json!({"inputResponses": {}, "requestState": state}),
    );
    assert_eq!(late["error"]["code"], -32602, "{late}");
}

#[test]
fn a_restarted_legacy_instance_costs_the_client_nothing() {
    if !ServerKind::TypeScriptV1.installed() {
        return;
    }
    let mut ts = [LegacyServer::start(ServerKind::TypeScriptV1, 0)];
    let gw = legacy_gateway(&ts, "");
    let add = |id: i64| {
        let r = call(
            gw.mcp_addr,
            id,
            "add",
            json!({"a": 1, "b": 2}),
            json!({}),
            Some("alice"),
            json!({}),
        );
        assert_eq!(r.status, 200, "{}", r.text());
        r.json()["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    for id in 1..5 {
        assert!(add(id).starts_with("3 (from"));
    }
    let m = scrape(&gw);
    let server = |m: &str, how: &str| {
        let how = format!("connection=\"{how}\"");
        sample(
            m,
            "mcp_edge_legacy_connections_total",
            &["leg=\"server\"", &how],
        )
    };
    eprintln!(
        "before restart: new {} kept {}",
        server(&m, "new"),
        server(&m, "kept")
    );
    // initialize, notifications/initialized, then four calls: on connections kept between
    // requests once the first is open (a call's event stream is read to its end).
    assert!(server(&m, "kept") >= 4.0, "{m}");
    ts[0].restart();
    assert!(
        add(5).starts_with("3 (from"),
        "the session lost with the restart is opened again"
    );
    let m = scrape(&gw);
    eprintln!(
        "after restart: new {} kept {}",
        server(&m, "new"),
        server(&m, "kept")
    );
    assert_eq!(
        sample(&m, "mcp_edge_legacy_server_sessions_total", &["\"opened\""]),
        1.0
    );
    assert_eq!(
        sample(
            &m,
            "mcp_edge_legacy_server_sessions_total",
            &["\"reopened\""]
        ),
        1.0
    );
}

#[test]
fn concurrent_first_calls_of_one_caller_share_one_session() {
    if !ServerKind::TypeScriptV1.installed() {
        return;
    }
    let ts = [LegacyServer::start(ServerKind::TypeScriptV1, 0)];
    let gw = legacy_gateway(&ts, "");
    let addr = gw.mcp_addr;
    // Eight first calls at once, one caller: one initialize between them (a server may bind
    // state to a session; eight sessions would split it, and seven would be dropped unused).
    let calls: Vec<_> = (0..8)
        .map(|id| {
            std::thread::spawn(move || {
                let args = json!({"a": 1, "b": 2});
                call(addr, id, "add", args, json!({}), Some("alice"), json!({}))
            })
        })
        .collect();
    for c in calls {
        let r = c.join().unwrap();
        assert_eq!(r.status, 200, "{}", r.text());
    }
    let m = scrape(&gw);
    let opened = sample(&m, "mcp_edge_legacy_server_sessions_total", &["\"opened\""]);
    assert_eq!(opened, 1.0, "{m}");
    assert_eq!(sample(&m, "mcp_edge_legacy_server_sessions", &[]), 1.0);
}
