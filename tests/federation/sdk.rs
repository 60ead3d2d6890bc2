//! A heterogeneous fleet behind one endpoint — `mcp-edge backend`, a TypeScript SDK server and
//! a Python SDK server (tests/peers), two instances each — driven by the official SDK clients.

use serde_json::Value;
use std::path::PathBuf;
use std::process::Command;

use crate::peers::{self, Peer, Sdk};
use mcp_edge::gateway::RunningGateway;

struct Fleet {
    gw: RunningGateway,
    _reference: mcp_edge::backend::Pool,
    _ts: Vec<Peer>,
    _py: Vec<Peer>,
}

fn fleet() -> Option<Fleet> {
    if !peers::installed(Sdk::TypeScript) || !peers::installed(Sdk::Python) {
        return None;
    }
    let reference =
        mcp_edge::backend::Pool::start(mcp_edge::backend::PoolOptions::local(2)).unwrap();
    let ts = Peer::fleet(Sdk::TypeScript, 2);
    let py = Peer::fleet(Sdk::Python, 2);
    let ts_addrs: Vec<_> = ts.iter().map(|p| p.addr).collect();
    let py_addrs: Vec<_> = py.iter().map(|p| p.addr).collect();
    let gw = super::gateway(
        &[
            ("reference", reference.addrs()),
            ("ts", &ts_addrs),
            ("py", &py_addrs),
        ],
        "  endpoints:\n    - {path: /mcp, pools: [reference, ts, py], page_size: 10}\n",
    );
    super::wait_state(&gw, &["reference", "ts", "py"], "fresh");
    Some(Fleet {
        gw,
        _reference: reference,
        _ts: ts,
        _py: py,
    })
}

/// Run a client script; its one JSON line.
fn run(cmd: &mut Command) -> Value {
    let out = cmd.output().expect("start the SDK client");
    assert!(
        out.status.success(),
        "SDK client failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(text.trim().lines().last().unwrap_or(""))
        .unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// The merged `tools/list` answers the gateway gave so far.
fn list_answers(gw: &RunningGateway) -> f64 {
    let text = crate::support::scrape(gw);
    crate::support::sample(
        &text,
        "mcp_edge_federation_answers_total",
        &["endpoint=\"/mcp\"", "method=\"tools/list\""],
    )
}

fn check(report: &Value, client: &str, pages: f64) {
    let tools: Vec<&str> = report["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    for t in [
        "reference__echo",
        "reference__create_repo",
        "ts__add",
        "ts__book",
        "py__greet",
        "py__order",
        "py__drop_table",
    ] {
        assert!(tools.contains(&t), "{client}: {t} missing from {tools:?}");
    }
    assert!(
        tools.contains(&"reference__greet") && tools.contains(&"py__greet"),
        "a name two servers serve is listed once per server"
    );
    // 44 tools in pages of 10 (the TS client follows nextCursor inside listTools).
    assert!(
        pages >= 5.0,
        "{client}: the merged list came in pages of 10, asked {pages} times"
    );
    let r = &report["results"];
    for (name, want) in [
        ("reference__echo", "hi"),
        ("ts__add", "sum "),
        ("py__greet", "hello "),
        ("reference__create_repo", "Created github.com/octocat/demo"),
        ("ts__book", "booked "),
        ("py__order", "ordered "),
    ] {
        let got = r[name].as_str().unwrap_or("");
        assert!(got.starts_with(want), "{client}: {name} answered {got:?}");
    }
    assert_eq!(
        report["elicitations"], 3,
        "{client}: one MRTR round per server"
    );
    // The TS server says which instance asked and which finished: round robin sends the retry
    // to the other one.
    let book = r["ts__book"].as_str().unwrap();
    let (asked, finished) = book
        .split_once("(asked by ")
        .unwrap()
        .1
        .trim_end_matches(')')
        .split_once(", finished by ")
        .unwrap();
    assert_ne!(
        asked, finished,
        "{client}: the retry leg landed on another instance: {book}"
    );
}

#[test]
fn the_typescript_sdk_client_lists_and_calls_every_server_through_one_endpoint() {
    let Some(f) = fleet() else { return };
    let dir = std::env::var_os("MCP_EDGE_TS_SDK_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/ts-sdk"));
    if !dir
        .join("node_modules/@modelcontextprotocol/client/package.json")
        .exists()
    {
        crate::support::programs::missing("the TypeScript SDK client is not installed", "mkdir -p target/ts-sdk && cd target/ts-sdk && npm install @modelcontextprotocol/client@2.4.0");
        return;
    }
    let script = dir.join("federation_client.mjs");
    std::fs::copy(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/federation/ts_client.mjs"),
        &script,
    )
    .unwrap();
    let url = format!("http://{}/mcp", f.gw.mcp_addr);
    let before = list_answers(&f.gw);
    let report = run(Command::new("node").arg(&script).arg(&url));
    check(&report, "TypeScript", list_answers(&f.gw) - before);
}

#[test]
fn the_python_sdk_client_lists_and_calls_every_server_through_one_endpoint() {
    let Some(f) = fleet() else { return };
    let py = peers::dir().join("venv/bin/python");
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/federation/py_client.py");
    let url = format!("http://{}/mcp", f.gw.mcp_addr);
    let before = list_answers(&f.gw);
    let report = run(Command::new(py).arg(script).arg(&url));
    check(&report, "Python", list_answers(&f.gw) - before);
}
