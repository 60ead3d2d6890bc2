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

#[test]
fn the_load_tester_drives_every_pools_tools_through_a_federated_endpoint() {
    let Some(f) = fleet() else { return };
    let target = format!("http://{}/mcp", f.gw.mcp_addr);
    let argv: Vec<String> = [
        "--target",
        &target,
        "--scenario",
        "auto",
        "--flows",
        "150",
        "--concurrency",
        "4",
        "--duration",
        "60s",
        "--timeout",
        "10s",
        "--quiet",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let a = mcp_edge::loadtest::LoadTestArgs::from_cli(argv).unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let r = rt.block_on(mcp_edge::loadtest::execute(&a)).unwrap();
    let ops: Vec<String> = r.operations().iter().map(|o| o.label.clone()).collect();
    for pool in ["reference__", "ts__", "py__"] {
        assert!(
            ops.iter().any(|o| o.contains(pool)),
            "no {pool} tool driven: {ops:?}"
        );
    }
    // The only failures are the reference backend's two tools that fail on purpose (they fail
    // the same way without federation): every other tool of every pool answered.
    let on_purpose = [
        "reference__test_error_handling",
        "reference__protocol_error_job",
    ];
    for o in r.operations() {
        let intended = on_purpose.iter().any(|t| o.label.ends_with(t));
        assert!(
            intended || (o.legs.errors == 0 && o.failed == 0),
            "{} failed: {}",
            o.label,
            r.summary_text()
        );
    }
    let failed: u64 = r.operations().iter().map(|o| o.failed).sum();
    assert_eq!(
        r.measures.flows_completed + failed,
        150,
        "{}",
        r.summary_text()
    );
    assert!(
        r.measures
            .leg(mcp_edge::loadtest::measure::LegKind::Retry)
            .requests
            > 0,
        "MRTR flows ran: {}",
        r.summary_text()
    );
}
