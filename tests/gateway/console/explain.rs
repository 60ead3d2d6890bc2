//! `POST /-/explain` and `mcp-edge explain` over real sockets: each stage that can refuse says
//! so with the answer the client would get; the balance step names the instance and the hash
//! key; a peek at a limit spends nothing; nothing reaches an upstream.

use mcp_edge::gateway::RunningGateway;
use serde_json::{json, Value};
use std::process::Command;

use crate::support::http::raw;
use crate::support::*;

/// `POST /-/explain` with `q` on the gateway's admin listener.
pub fn explain(gw: &RunningGateway, q: &Value) -> Value {
    let body = q.to_string();
    let req = format!(
        "POST /-/explain HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let r = raw(gw.admin_addr.unwrap(), req.as_bytes());
    assert_eq!(r.status, 200, "{}", r.text());
    serde_json::from_slice(&r.body).unwrap()
}

fn question(claimed: &str, body_name: &str) -> Value {
    json!({"headers": {"Content-Type": "application/json", "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "tools/call", "Mcp-Name": claimed}, "body": call(1, body_name)})
}

fn refused_by(v: &Value) -> (&str, u64, i64) {
    assert_eq!(v["verdict"], "refused", "{v:#}");
    let a = &v["answer"];
    (
        v["decided_by"].as_str().unwrap(),
        a["status"].as_u64().unwrap(),
        a["code"].as_i64().unwrap(),
    )
}

#[test]
fn each_stage_that_refuses_says_so_with_the_clients_answer() {
    let up = Upstreams::start(2);
    let cfg = config(
        &[("p", &up.addrs, "balance: round_robin")],
        "routes:\n  - {name: calls, match: {method: tools/call}, pool: p}\n\
         rate_limits:\n  - {name: two-per-minute, match: {name: limited}, key: [name], rate: 2/m, burst: 2}\n",
    );
    let gw = RunningGateway::start(cfg).unwrap();
    // Admission: an Origin the gateway does not allow (DNS-rebinding protection).
    let mut q = question("echo", "echo");
    q["headers"]["Origin"] = json!("https://evil.example");
    let v = explain(&gw, &q);
    assert_eq!(refused_by(&v), ("admit", 403, -32600), "{v:#}");
    // Route: no route for tools/list and no default route.
    let q = json!({"headers": {"Content-Type": "application/json", "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "tools/list"}, "body": plain(1, "tools/list")});
    assert_eq!(refused_by(&explain(&gw, &q)), ("route", 404, -32601));
    // Check: the header says echo, the body deploy; the body's name is reported.
    let v = explain(&gw, &question("echo", "deploy"));
    assert_eq!(refused_by(&v), ("check", 400, -32020));
    let check = v["steps"].as_array().unwrap().last().unwrap();
    assert_eq!(check["detail"]["body_name"], "deploy");
    // Limits: peeking spends nothing; two real calls use the burst; then explain says refused.
    for _ in 0..5 {
        assert_eq!(
            explain(&gw, &question("limited", "limited"))["verdict"],
            "forwarded"
        );
    }
    for i in 0..2 {
        let r = post(
            gw.mcp_addr,
            &refs(&call_headers("limited")),
            &call(i, "limited"),
        );
        assert_eq!(r.status, 200, "explaining spent a token: {}", r.text());
    }
    let v = explain(&gw, &question("limited", "limited"));
    assert_eq!(refused_by(&v), ("limits", 429, -31001), "{v:#}");
    // Nothing explained reached an upstream: only the two real calls did.
    assert_eq!(up.count(), 2);
}

#[test]
fn the_balance_step_names_the_instance_and_why_in_every_mode() {
    for balance in [
        "balance: round_robin",
        "balance: least_loaded",
        "balance: hash",
    ] {
        let up = Upstreams::start(3);
        let cfg = config(&[("p", &up.addrs, balance)], "default_route: {pool: p}\n");
        let gw = RunningGateway::start(cfg).unwrap();
        let v = explain(&gw, &question("echo", "echo"));
        assert_eq!(v["verdict"], "forwarded", "{balance}: {v:#}");
        let step = v["steps"].as_array().unwrap().last().unwrap();
        assert_eq!(step["step"], "balance");
        let inst = step["detail"]["instance"].as_str().unwrap();
        assert!(up.instance_names().iter().any(|n| n == inst), "{inst}");
        if balance.ends_with("hash") {
            assert_eq!(step["detail"]["hash"]["hash_key"], "mcp-name");
            assert_eq!(step["detail"]["hash"]["value"], "echo");
            // The explained instance is where the call really goes.
            let r = post(gw.mcp_addr, &refs(&call_headers("echo")), &call(1, "echo"));
            assert_eq!(r.header("x-mcp-edge-upstream"), Some(inst));
        }
        assert_eq!(up.count(), usize::from(balance.ends_with("hash")));
    }
}

/// `mcp-edge explain --config gateway.yaml --request <file holding text>`.
fn offline(dir: &std::path::Path, text: &str) -> std::process::Output {
    let q = dir.join("q.json");
    std::fs::write(&q, text).unwrap();
    let config = format!("{}/gateway.yaml", env!("CARGO_MANIFEST_DIR"));
    Command::new(env!("CARGO_BIN_EXE_mcp-edge"))
        .args(["explain", "--config", &config, "--request"])
        .arg(&q)
        .output()
        .unwrap()
}

#[test]
fn the_offline_command_explains_from_a_config_file() {
    let dir = std::env::temp_dir().join(format!("mcp-edge-explain-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = offline(&dir, &question("echo", "deploy").to_string());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(refused_by(&v), ("check", 400, -32020));
    let out = offline(&dir, "not json");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("\"headers\""));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_fresh_cache_entry_is_explained_as_a_hit_and_a_bad_token_as_auths_refusal() {
    use crate::support::cache::{read, resource_upstream};
    use crate::support::http::{good_headers, meta};
    let up = resource_upstream();
    let gw = crate::support::cache::gateway(&[up.addr], "");
    let q = || {
        let headers: serde_json::Map<String, Value> =
            good_headers("resources/read", Some("res://a"))
                .into_iter()
                .map(|(k, v)| (k, json!(v)))
                .collect();
        let body = json!({"jsonrpc": "2.0", "id": 5, "method": "resources/read",
            "params": {"uri": "res://a", "_meta": meta(json!({}))}});
        json!({"headers": headers, "body": body.to_string()})
    };
    let v = explain(&gw, &q());
    assert_eq!(
        (v["verdict"].as_str(), v["decided_by"].as_str()),
        (Some("forwarded"), Some("balance")),
        "{v:#}"
    );
    assert_eq!(read(&gw, 1, "res://a", &[]).status, 200);
    let v = explain(&gw, &q());
    assert_eq!(
        (v["verdict"].as_str(), v["decided_by"].as_str()),
        (Some("answered"), Some("cache")),
        "{v:#}"
    );
}
