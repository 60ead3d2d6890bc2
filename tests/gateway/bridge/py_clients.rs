//! The official Python SDK 2.x client (mcp 2.3.0 of tests/peers, pinned to 2026-07-28) in front
//! of pools of 2025-era servers (the TypeScript SDK v1 and the Python SDK 1.x of
//! tests/peers_legacy): every call, elicitation, sampling and roots answered through MRTR, on
//! the pool's endpoint and through a federated endpoint of two legacy pools.

use serde_json::Value;
use std::time::Duration;

use super::servers::{every_call_answered, pool_line, text, TS_CALLS};
use super::{LegacyServer, ServerKind};
use crate::support::config;
use mcp_edge::gateway::RunningGateway;

/// The official Python SDK 2.x client (mcp 2.3.0 of tests/peers, mode pinned to 2026-07-28)
/// against `url`, calling `calls` (`;`-separated, `name=JSON`): its JSON line.
fn modern_py_client(url: &str, calls: &str) -> Option<Value> {
    if !crate::peers::installed(crate::peers::Sdk::Python) {
        return None;
    }
    let py = crate::peers::dir().join("venv/bin/python");
    let mut cmd = std::process::Command::new(py);
    cmd.arg(super::script("modern_py_client.py"))
        .args([url, calls]);
    let out = super::output_within(&mut cmd, Duration::from_secs(60));
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().last().unwrap_or_default();
    Some(serde_json::from_str(line).unwrap_or_else(|e| {
        panic!(
            "the Python 2.x client printed no JSON ({e}): {text}\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    }))
}

#[test]
fn the_python_2x_client_uses_sdk_v1_servers_mrtr_included() {
    if !ServerKind::TypeScriptV1.installed() || !ServerKind::PythonV1.installed() {
        return;
    }
    let ts = [
        LegacyServer::start(ServerKind::TypeScriptV1, 0),
        LegacyServer::start(ServerKind::TypeScriptV1, 0),
    ];
    let py = [LegacyServer::start(ServerKind::PythonV1, 0)];
    let cfg = config(
        &[],
        &format!(
            "{}{}default_route: {{pool: ts}}\nfederation:\n  endpoints:\n    - {{ path: /fed, pools: [ts, py], collisions: prefix }}\n",
            pool_line("ts", &ts),
            pool_line("py", &py)
        ),
    );
    let gw = RunningGateway::start(cfg).unwrap();
    let Some(out) = modern_py_client(&format!("http://{}/mcp", gw.mcp_addr), TS_CALLS) else {
        return;
    };
    every_call_answered(&out);
    // The same client through a federated endpoint of two legacy pools.
    let calls = "py__confirm_deploy={\"service\":\"db\",\"environment\":\"prod\"};ts__ask_model={\"question\":\"q\"}";
    let out = modern_py_client(&format!("http://{}/fed", gw.mcp_addr), calls).unwrap();
    assert_eq!(out["ok"], true, "{out}");
    assert!(
        text(&out, "py__confirm_deploy").starts_with("deployed db to prod (asked by py-v1-"),
        "{out}"
    );
    assert_eq!(text(&out, "ts__ask_model"), "the model said: Paris");
}
