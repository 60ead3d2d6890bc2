//! The official 2025-era SDK clients through the bridge to the 2026-only reference backend:
//! every tool listed, every multi round-trip tool completed with the client's own handlers
//! answering the questions the backend's `input_required` carried, through one gateway, with
//! the answers POSTed to a second replica, and through a gateway whose only listener is TLS.

use serde_json::Value;

use super::{backend, gateway, Client, CALLS};
use crate::support::{sample, scrape};

fn assert_completed(client: Client, out: &Value) {
    assert_eq!(out["ok"], true, "{client:?}: {out}");
    assert_eq!(out["protocolVersion"], "2025-11-25", "{client:?}: {out}");
    assert_eq!(out["sessionId"], "present");
    let tools: Vec<&str> = out["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        tools.contains(&"test_input_required_result_multiple_inputs") && tools.len() > 20,
        "{tools:?}"
    );
    let r = &out["results"];
    let text = |t: &str| r[t]["text"].as_str().unwrap_or_default().to_owned();
    assert_eq!(text("echo"), "hi");
    assert_eq!(
        text("test_input_required_result_elicitation"),
        "Hello, Ada!"
    );
    assert_eq!(
        text("test_input_required_result_sampling"),
        "The model answered: Paris"
    );
    assert_eq!(
        text("test_input_required_result_list_roots"),
        "Client roots: file:///work"
    );
    assert!(
        text("test_input_required_result_multiple_inputs").starts_with("Received all answers."),
        "{r}"
    );
    assert_eq!(
        text("test_input_required_result_multi_round"),
        "Ada's favorite color is Ada"
    );
    for (tool, v) in r.as_object().unwrap() {
        assert_eq!(v["isError"], false, "{client:?} {tool}: {v}");
    }
    // Each question reached the client's own handler: 1 + 1 + 1 + 3 + 2.
    let asked = out["asked"].as_array().unwrap();
    assert_eq!(asked.len(), 8, "{asked:?}");
}

#[test]
fn the_typescript_and_python_v1_clients_complete_every_mrtr_tool_through_the_bridge() {
    let clients = Client::installed_ones();
    if clients.is_empty() {
        return;
    }
    let pool = backend();
    let gw = gateway(&pool, "");
    let url = format!("http://{}/mcp", gw.mcp_addr);
    for c in &clients {
        let out = c.run(&url, CALLS, None);
        assert_completed(*c, &out);
    }
    let m = scrape(&gw);
    let n = clients.len() as f64;
    assert_eq!(
        sample(&m, "mcp_edge_legacy_sessions_total", &["2025-11-25"]),
        n
    );
    // Five of the calls asked (multi_round twice, but one flow): every flow completed.
    assert_eq!(
        sample(&m, "mcp_edge_legacy_flows_total", &["completed"]),
        5.0 * n
    );
    assert_eq!(
        sample(&m, "mcp_edge_legacy_answers_total", &["local"]),
        8.0 * n
    );
    assert_eq!(sample(&m, "mcp_edge_legacy_calls_waiting", &[]), 0.0);
    // The fleet is plain HTTP/1.1 on the direct leg: every leg of a call (and each session's
    // `server/discover`) ran on the client's own session, none as a subrequest.
    assert!(legs(&m, "inline") >= 13.0 * n, "{m}");
    assert_eq!(legs(&m, "inside"), 0.0, "{m}");
}

/// How many legs went inside the process `how`: on the client's own session (`inline`) or as a
/// subrequest (`inside`).
fn legs(m: &str, how: &str) -> f64 {
    let how = format!("connection=\"{how}\"");
    sample(
        m,
        "mcp_edge_legacy_connections_total",
        &["leg=\"hop\"", &how],
    )
}

#[test]
fn with_pingoras_pipe_to_the_fleet_the_legs_go_as_subrequests_and_complete_as_well() {
    // A leg that leaves `request_filter` for pingora's pipe (here every leg: the pipe is the
    // configured upstream leg) cannot run on the client's session; it goes as a subrequest of
    // the client's request, with the same answers.
    if !Client::TypeScriptV1.installed() {
        return;
    }
    let pool = backend();
    let gw = gateway(&pool, "connections: {upstream_leg: pingora}\n");
    let url = format!("http://{}/mcp", gw.mcp_addr);
    let out = Client::TypeScriptV1.run(&url, CALLS, None);
    assert_completed(Client::TypeScriptV1, &out);
    let m = scrape(&gw);
    assert_eq!(legs(&m, "inline"), 0.0, "{m}");
    assert!(legs(&m, "inside") >= 13.0, "{m}");
    assert_eq!(
        sample(&m, "mcp_edge_legacy_flows_total", &["completed"]),
        5.0
    );
}

#[test]
fn answers_posted_to_another_replica_reach_the_call_that_waits_for_them() {
    if !Client::TypeScriptV1.installed() {
        return;
    }
    let keys = super::keys_file();
    let extra = format!("legacy: {{ keys_file: {} }}\n", keys.display());
    let pool = backend();
    let (a, b) = (gateway(&pool, &extra), gateway(&pool, &extra));
    let (url_a, url_b) = (
        format!("http://{}/mcp", a.mcp_addr),
        format!("http://{}/mcp", b.mcp_addr),
    );
    let out = Client::TypeScriptV1.run(&url_a, CALLS, Some(&url_b));
    assert_completed(Client::TypeScriptV1, &out);
    assert_eq!(out["answersSentElsewhere"], 8, "{out}");
    assert_eq!(
        sample(&scrape(&b), "mcp_edge_legacy_answers_total", &["forwarded"]),
        8.0
    );
    assert_eq!(
        sample(&scrape(&a), "mcp_edge_legacy_answers_total", &["local"]),
        8.0
    );
    let _ = std::fs::remove_dir_all(keys.parent().unwrap());
}

#[test]
fn a_federated_endpoint_serves_the_v1_client_its_merged_tools_and_their_questions() {
    if !Client::TypeScriptV1.installed() {
        return;
    }
    let (p1, p2) = (backend(), backend());
    let cfg = crate::support::config(
        &[("a", p1.addrs(), ""), ("b", p2.addrs(), "")],
        "default_route: {pool: a}\nfederation:\n  endpoints:\n    - { path: /fed, pools: [a, b], collisions: prefix }\n",
    );
    let gw = mcp_edge::gateway::RunningGateway::start(cfg).unwrap();
    let url = format!("http://{}/fed", gw.mcp_addr);
    let calls =
        "a__test_input_required_result_multiple_inputs;b__test_input_required_result_multi_round";
    let out = Client::TypeScriptV1.run(&url, calls, None);
    assert_eq!(out["ok"], true, "{out}");
    let tools = out["tools"].as_array().unwrap();
    assert!(
        tools.iter().any(|t| t == "a__echo") && tools.iter().any(|t| t == "b__echo"),
        "{tools:?}"
    );
    let r = &out["results"];
    assert!(
        r["a__test_input_required_result_multiple_inputs"]["text"]
            .as_str()
            .unwrap()
            .starts_with("Received all answers."),
        "{r}"
    );
    assert_eq!(
        r["b__test_input_required_result_multi_round"]["text"],
        "Ada's favorite color is Ada"
    );
    assert_eq!(out["asked"].as_array().unwrap().len(), 5, "{out}");
}

#[test]
fn a_gateway_whose_only_listener_is_tls_bridges_the_v1_clients() {
    // A call's legs run inside the process: no plain listener is needed to carry them. The
    // session goes without a standalone stream (405, which both clients take in their stride).
    use crate::support::tls::{tls_listener, Ca, TempDir};
    let clients = Client::installed_ones();
    if clients.is_empty() {
        return;
    }
    let pool = backend();
    let dir = TempDir::new("bridge-tls");
    let ca = Ca::new("bridge CA");
    let (cert, key) = ca.server("gateway", &["localhost"], 30).write(&dir, "gw");
    let ca_file = dir.write("ca.pem", &ca.pem);
    let tls = std::net::SocketAddr::from(([127, 0, 0, 1], crate::support::free_port()));
    let list: Vec<String> = pool.addrs().iter().map(|a| a.to_string()).collect();
    let y = format!(
        // Work stealing, as every test gateway (tests start and stop many in one process).
        "work_stealing: true\nlisten:\n  mcp: {}\n  admin: 127.0.0.1:{}\npools:\n  fleet:\n    instances: [{}]\ndefault_route: {{ pool: fleet }}\n",
        tls_listener(tls, &cert, &key, ""),
        crate::support::free_port(),
        list.join(", ")
    );
    let cfg = mcp_edge::config::Config::parse(&y, "bridge-tls.yaml").unwrap();
    let gw = mcp_edge::gateway::RunningGateway::start(cfg).unwrap();
    let url = format!("https://localhost:{}/mcp", tls.port());
    for c in &clients {
        // Each trusts the test CA the way its HTTP stack reads one from the environment.
        let env = [
            ("NODE_EXTRA_CA_CERTS", ca_file.as_path()),
            ("SSL_CERT_FILE", ca_file.as_path()),
        ];
        let out = c.run_with(&url, CALLS, None, &env);
        assert_completed(*c, &out);
    }
    let m = scrape(&gw);
    assert!(legs(&m, "inline") > 0.0, "{m}");
    assert_eq!(
        sample(&m, "mcp_edge_legacy_flows_total", &["completed"]),
        5.0 * clients.len() as f64
    );
}
