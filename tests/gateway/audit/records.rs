//! What one record says: the verified caller (a real token through the auth tier), each
//! outcome (result, tool error, JSON-RPC error, refusals by the policy and by auth), prompts
//! and resources, both names of a federated, prefixed tool, and task ends (the load tester's
//! `tasks` scenario) joined to the calls that created them.

use super::{records, scratch, written};
use crate::support::{config, eventually};
use mcp_edge::gateway::RunningGateway;
use serde_json::{json, Value};
use std::time::Duration;

#[test]
fn records_name_the_verified_caller_and_how_each_call_ended() {
    use crate::support::auth::testkeys::{self, claims, ec, sign};
    use crate::support::auth::ISS;
    use crate::support::auth::{auth_yaml, url_jwks, JwksServer};
    use crate::support::http::rpc;
    use crate::support::scripted::{Script, Scripted};
    const RESOURCE: &str = "https://mcp.test/mcp";
    let dir = scratch("who");
    let path = dir.join("audit.jsonl");
    let up = Scripted::start(|req| {
        let now = Duration::ZERO;
        match req["params"]["name"].as_str() {
            Some("fails") => Script::Result(json!({"content": [], "isError": true}), now),
            Some("broken") => Script::Error(-32602),
            _ => Script::Result(json!({"content": [], "messages": [], "contents": []}), now),
        }
    });
    let k = ec("audit");
    let jwks = JwksServer::start(testkeys::jwks(&[&k]));
    let cfg = config(
        &[("default", &[up.addr], "balance: round_robin")],
        &format!(
            "default_route: {{pool: default}}\naudit:\n  sink: file\n  file: {{path: {}}}\nargument_policy:\n  - {{name: staging-only, match: {{name: deploy}}, schema: {{properties: {{environment: {{const: staging}}}}}}}}\n{}",
            path.display(),
            auth_yaml(RESOURCE, &url_jwks(&jwks), "")
        ),
    );
    let gw = RunningGateway::start(cfg).unwrap();
    let mut c = claims(ISS, RESOURCE, "alice", "tools");
    c["client_id"] = json!("ci-bot");
    let bearer = format!("Bearer {}", sign(&k, &c));
    let auth = [("Authorization", bearer.as_str())];
    let call = |id: i64, name: &str, args: Value, h: &[(&str, &str)]| {
        rpc(
            gw.mcp_addr,
            json!(id),
            "tools/call",
            json!({"name": name, "arguments": args}),
            h,
        )
    };
    assert_eq!(
        call(1, "ok", json!({"b": 1, "a": [true]}), &auth).status,
        200
    );
    assert_eq!(call(2, "fails", json!({}), &auth).status, 200);
    assert_eq!(call(3, "broken", json!({}), &auth).status, 200);
    assert_eq!(
        call(4, "deploy", json!({"environment": "prod"}), &auth).status,
        403
    );
    assert_eq!(call(5, "ok", json!({}), &[]).status, 401);
    let p = json!({"name": "greet", "arguments": {"who": "bob"}});
    assert_eq!(
        rpc(gw.mcp_addr, json!(6), "prompts/get", p, &auth).status,
        200
    );
    let r = json!({"uri": "file:///notes.txt"});
    assert_eq!(
        rpc(gw.mcp_addr, json!(7), "resources/read", r, &auth).status,
        200
    );
    assert!(eventually(Duration::from_secs(10), || written(&gw) >= 7.0));
    let rs = records(&path);
    assert_eq!(rs.len(), 7, "{rs:?}");
    let by = |name: &str| rs.iter().find(|r| r["name"] == name).unwrap().clone();

    let ok = &rs[0];
    assert_eq!(
        (&ok["name"], &ok["outcome"]),
        (&json!("ok"), &json!("result")),
        "{ok}"
    );
    assert_eq!(
        (&ok["subject"], &ok["client_id"]),
        (&json!("alice"), &json!("ci-bot")),
        "{ok}"
    );
    assert!(
        ok.get("arguments").is_none(),
        "arguments: digest writes no arguments"
    );
    use sha2::Digest;
    let want = mcp_edge::mcp::hex::encode(&sha2::Sha256::digest(br#"{"a":[true],"b":1}"#));
    assert_eq!(ok["arguments_sha256"], want.as_str());
    assert_eq!(by("fails")["outcome"], "tool_error");
    let broken = by("broken");
    assert_eq!(
        (&broken["outcome"], &broken["error_code"]),
        (&json!("error"), &json!(-32602))
    );
    let deploy = by("deploy");
    assert_eq!(deploy["outcome"], "refused", "{deploy}");
    assert_eq!(
        (&deploy["reason"], &deploy["error_code"]),
        (&json!("policy-denied"), &json!(-31013))
    );
    assert_eq!(deploy["subject"], "alice");
    let anonymous = &rs[4];
    assert_eq!(
        (&anonymous["outcome"], &anonymous["status"]),
        (&json!("refused"), &json!(401))
    );
    assert!(anonymous.get("subject").is_none() && anonymous.get("instance").is_none());
    let greet = by("greet");
    assert_eq!(
        (&greet["method"], &greet["outcome"]),
        (&json!("prompts/get"), &json!("result"))
    );
    let read = by("file:///notes.txt");
    assert_eq!(read["method"], "resources/read");
    let uri = mcp_edge::mcp::hex::encode(&sha2::Sha256::digest(br#"{"uri":"file:///notes.txt"}"#));
    assert_eq!(read["arguments_sha256"], uri.as_str());
    // The upstream saw every call the audit says reached it, and no other.
    assert_eq!(up.seen().len(), 5);
    drop(gw);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_prefixed_name_is_recorded_as_the_client_sent_it_and_as_the_server_saw_it() {
    use crate::federation::scripted::{call_text, two_servers};
    let dir = scratch("fed");
    let path = dir.join("audit.jsonl");
    let (a, b) = two_servers();
    let gw = crate::federation::gateway_with(
        &[("a", &[a.s.addr]), ("b", &[b.s.addr])],
        "  endpoints:\n    - {path: /mcp, pools: [a, b]}\n",
        &format!(
            "audit:\n  sink: file\n  file: {{path: {}}}\n",
            path.display()
        ),
    );
    crate::federation::wait_state(&gw, &["a", "b"], "fresh");
    assert_eq!(call_text(&gw, "/mcp", "b__greet").unwrap(), "b:greet");
    assert!(eventually(Duration::from_secs(10), || written(&gw) >= 1.0));
    let rs = records(&path);
    let r = rs.iter().find(|r| r["kind"] == "call").unwrap();
    assert_eq!(
        (&r["name"], &r["server_name"]),
        (&json!("b__greet"), &json!("greet")),
        "{r}"
    );
    assert_eq!(
        (&r["pool"], &r["endpoint"]),
        (&json!("b"), &json!("/mcp")),
        "{r}"
    );
    drop(gw);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn tasks_end_once_each_in_the_audit_as_the_load_tester_counts_them() {
    use mcp_edge::backend::{Pool, PoolOptions};
    use mcp_edge::loadtest::{self, LoadTestArgs};
    let dir = scratch("tasks");
    let path = dir.join("audit.jsonl");
    let pool = Pool::start(PoolOptions::local(1)).unwrap();
    let cfg = config(
        &[("p", pool.addrs(), "balance: round_robin")],
        &format!(
            "default_route: {{pool: p}}\naudit:\n  sink: file\n  file: {{path: {}}}\n",
            path.display()
        ),
    );
    let gw = RunningGateway::start(cfg).unwrap();
    let target = format!("http://{}/mcp", gw.mcp_addr);
    let argv = [
        "--target",
        &target,
        "--scenario",
        "tasks",
        "--flows",
        "12",
        "--concurrency",
        "4",
        "--task-cancel-share",
        "0.3",
        "--timeout",
        "20s",
        "--duration",
        "120s",
        "--quiet",
    ];
    let args = LoadTestArgs::from_cli(argv).unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let report = rt.block_on(loadtest::execute(&args)).unwrap();
    let t = &report.measures.tasks;
    let text = report.summary_text();
    assert_eq!((t.created, report.errors()), (12, 0), "{text}");
    assert_eq!(t.created, t.completed + t.cancelled + t.failed, "{text}");
    let tasks = |gw: &RunningGateway| {
        let m = crate::support::scrape(gw);
        crate::support::sample(&m, "mcp_edge_audit_records_total", &["kind=\"task\""])
    };
    assert!(
        eventually(Duration::from_secs(10), || tasks(&gw) >= 12.0),
        "{}",
        tasks(&gw)
    );
    let rs = records(&path);
    let count = |kind: &str, outcome: &str| {
        let n = rs
            .iter()
            .filter(|r| r["kind"] == kind && r["outcome"] == outcome)
            .count();
        n as u64
    };
    assert_eq!(count("call", "task"), t.created);
    assert_eq!(count("task", "completed"), t.completed, "{text}");
    assert_eq!(count("task", "cancelled"), t.cancelled, "{text}");
    assert_eq!(count("task", "failed"), t.failed, "{text}");
    // Each end names the call that created its task (by the id's digest) and its tool.
    for end in rs.iter().filter(|r| r["kind"] == "task") {
        let made: Vec<&Value> = rs
            .iter()
            .filter(|r| r["outcome"] == "task" && r["task_id_digest"] == end["task_id_digest"])
            .collect();
        assert_eq!(made.len(), 1, "{end}");
        assert_eq!(made[0]["name"], end["name"], "{end}");
    }
    drop(gw);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_stdout_sink_of_mcp_edge_serve_writes_only_records_there() {
    use crate::support::http::call as mcp_call;
    use crate::support::{free_port, spawn::Procs};
    use mcp_edge::backend::{Pool, PoolOptions};
    use std::io::BufRead;
    let dir = scratch("stdout");
    let pool = Pool::start(PoolOptions::local(1)).unwrap();
    let mcp = free_port();
    let yaml = format!(
        "listen: {{mcp: 127.0.0.1:{mcp}, admin: null}}\npools:\n  p: {{instances: [{}]}}\ndefault_route: {{pool: p}}\naudit: {{sink: stdout}}\n",
        pool.addrs()[0]
    );
    let file = dir.join("serve.yaml");
    std::fs::write(&file, yaml).unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_mcp-edge"))
        .args(["serve", "--access-log", "json", "--config"])
        .arg(&file)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let out = child.stdout.take().unwrap();
    let _serve = Procs(vec![child]);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let addr: std::net::SocketAddr = format!("127.0.0.1:{mcp}").parse().unwrap();
    let up = || std::net::TcpStream::connect(addr).is_ok();
    assert!(
        eventually(Duration::from_secs(20), up),
        "serve did not start"
    );
    for i in 0..2 {
        let r = mcp_call(
            addr,
            i,
            "echo",
            json!({"text": "hi"}),
            json!({}),
            None,
            json!({}),
        );
        assert_eq!(r.status, 200, "{}", r.text());
    }
    // The access log (JSON too) goes to standard error: standard output has the records only.
    for i in 0..2 {
        let line = rx
            .recv_timeout(Duration::from_secs(10))
            .expect("an audit line");
        let r: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(
            (&r["kind"], &r["name"]),
            (&json!("call"), &json!("echo")),
            "{i}: {r}"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
