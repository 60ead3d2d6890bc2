//! The audit trail over real sockets: `mcp-edge loadtest` (mixed MRTR flows, a spoofed share)
//! through a gateway with the file sink gives exactly the load tester's counts per outcome,
//! with arguments digested and redacted as configured; a sink nobody reads (a FIFO) with a
//! queue of one counts every record it cannot take as dropped while the gateway keeps
//! answering, and writes the rest once a reader comes; records name the verified caller, every
//! outcome (result, tool error, JSON-RPC error, refusal), prompts and resources, and both names
//! of a federated, prefixed tool; a flow left after its first leg is recorded abandoned, one
//! whose retry the server refuses failed, each with its legs under its id.

use crate::support::http::call as mcp_call;
use crate::support::{config, eventually, sample, scrape};
use mcp_edge::backend::{Pool, PoolOptions};
use mcp_edge::gateway::RunningGateway;
use mcp_edge::loadtest::{self, LoadTestArgs};
use serde_json::{json, Value};
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub(super) fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("mcp-edge-audit-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn gateway(pool: &Pool, audit: &str) -> RunningGateway {
    let cfg = config(
        &[("mrtr", pool.addrs(), "balance: round_robin")],
        &format!("default_route: {{pool: mrtr}}\naudit:\n{audit}"),
    );
    RunningGateway::start(cfg).unwrap()
}

pub(super) fn records(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).expect("each line is one JSON record"))
        .collect()
}

pub(super) fn written(gw: &RunningGateway) -> f64 {
    sample(&scrape(gw), "mcp_edge_audit_records_total", &[])
}

#[test]
fn a_mixed_mrtr_load_test_is_recorded_exactly_with_arguments_redacted() {
    let dir = scratch("load");
    let path = dir.join("audit.jsonl");
    let pool = Pool::start(PoolOptions::local(2)).unwrap();
    let audit = format!(
        "  sink: file\n  file: {{path: {}, max_bytes: 100000000}}\n  arguments: full\n  full_for: [charge, 'dep*']\n  redact: {{keys: [amount], patterns: ['pay[a-z]+']}}\n",
        path.display()
    );
    let gw = gateway(&pool, &audit);
    let target = format!("http://{}/mcp", gw.mcp_addr);
    let argv = [
        "--target",
        &target,
        "--flows",
        "300",
        "--duration",
        "30s",
        "--scenario",
        "mixed",
        "--concurrency",
        "6",
        "--bad-share",
        "0.1",
        "--quiet",
        "--max-error-rate",
        "0",
    ];
    let args = LoadTestArgs::from_cli(argv).unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let report = rt.block_on(loadtest::execute(&args)).unwrap();
    let m = &report.measures;
    assert_eq!(report.errors(), 0, "{}", report.summary_text());
    let legs = |k: &str| {
        m.legs
            .iter()
            .zip(["first", "retry", "plain", "bad"])
            .find(|(_, n)| *n == k)
            .unwrap()
            .0
            .requests
    };
    let (first, retry, bad) = (legs("first"), legs("retry"), legs("bad"));
    let multi_round: u64 = m
        .rounds
        .iter()
        .filter(|(r, _)| **r >= 2)
        .map(|(_, n)| n)
        .sum();
    assert!(
        bad > 0 && retry > 0 && multi_round > 0,
        "{}",
        report.summary_text()
    );

    // Every call and every flow that ended is written (the writer is just behind the answers).
    let total = (first + retry + bad + multi_round) as f64;
    assert!(
        eventually(Duration::from_secs(10), || written(&gw) >= total),
        "{} of {total} records written",
        written(&gw)
    );
    let rs = records(&path);
    let count = |f: &dyn Fn(&Value) -> bool| rs.iter().filter(|r| f(r)).count() as u64;
    let kind = |r: &Value, k: &str, o: &str| r["kind"] == k && r["outcome"] == o;
    assert_eq!(count(&|r| r["kind"] == "call"), first + retry + bad);
    assert_eq!(
        count(&|r| kind(r, "call", "result")),
        first,
        "one complete result per flow"
    );
    assert_eq!(count(&|r| kind(r, "call", "input_required")), retry);
    assert_eq!(count(&|r| kind(r, "call", "refused")), m.bad_rejected);
    assert_eq!(m.bad_rejected, bad);
    assert_eq!(count(&|r| kind(r, "flow", "completed")), multi_round);
    assert_eq!(
        count(&|r| r["kind"] == "flow"),
        multi_round,
        "no flow failed or was abandoned"
    );
    assert_eq!(
        sample(&scrape(&gw), "mcp_edge_audit_dropped_total", &[]),
        0.0
    );

    // Each record says where it went and how; a flow's legs share its id and count its rounds.
    for r in rs.iter().filter(|r| r["kind"] == "call") {
        assert_eq!(r["method"], "tools/call", "{r}");
        assert_eq!(r["endpoint"], "/mcp", "{r}");
        if r["outcome"] == "refused" {
            assert!(r["reason"].is_string() && r["error_code"].is_i64(), "{r}");
            assert_eq!(r["status"], 400, "{r}");
            continue;
        }
        assert_eq!(
            (&r["pool"], r["instance"].is_string()),
            (&json!("mrtr"), true),
            "{r}"
        );
        assert!(
            r["arguments_sha256"]
                .as_str()
                .is_some_and(|d| d.len() == 64),
            "{r}"
        );
        assert!(
            r["duration_ms"].is_number() && r["upstream_ms"].is_number(),
            "{r}"
        );
        if r["outcome"] == "input_required" || r["round"].as_u64() > Some(1) {
            assert!(r["flow_id"].is_string(), "{r}");
        }
    }
    let by_flow = |id: &Value| count(&|r| r["kind"] == "call" && &r["flow_id"] == id);
    for f in rs.iter().filter(|r| r["kind"] == "flow") {
        assert_eq!(Some(by_flow(&f["flow_id"])), f["rounds"].as_u64(), "{f}");
    }

    // Redaction: the named key and the pattern's matches never reach the file; the digest is
    // over the arguments as sent (equal arguments, equal digests).
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(!text.contains("payments") && !text.contains("\"amount\":48"));
    let charge = rs
        .iter()
        .find(|r| r["name"] == "charge" && r["arguments"].is_object())
        .unwrap();
    assert_eq!(
        charge["arguments"],
        json!({"cart_id": "c18", "amount": "[redacted]"})
    );
    let deploy = rs
        .iter()
        .find(|r| r["name"] == "deploy" && r["arguments"].is_object())
        .unwrap();
    assert_eq!(deploy["arguments"]["service"], "[redacted]");
    let repo: Vec<&Value> = rs
        .iter()
        .filter(|r| r["kind"] == "call" && r["name"] == "create_repo" && r["outcome"] != "refused")
        .map(|r| &r["arguments_sha256"])
        .collect();
    // sha256 of the canonical {"repo":"loadtest"}.
    let want = json!("583c89ca59237494bd745d13942b05d7905d2e8b9c5080bb8f70ad833dabed36");
    assert!(
        repo.len() > 1 && repo.iter().all(|d| **d == want),
        "{:?}",
        &repo[..2]
    );
    // full_for names charge and dep*: create_repo's records carry the digest only.
    let repo_args = rs
        .iter()
        .filter(|r| r["name"] == "create_repo" && r.get("arguments").is_some());
    assert_eq!(repo_args.count(), 0);
    drop(gw);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_sink_nobody_reads_drops_and_counts_while_the_gateway_keeps_answering() {
    let dir = scratch("fifo");
    let fifo = dir.join("audit.fifo");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    assert!(made.is_ok_and(|s| s.success()), "mkfifo {}", fifo.display());
    let pool = Pool::start(PoolOptions::local(1)).unwrap();
    let audit = format!(
        "  sink: file\n  file: {{path: {}}}\n  queue: 1\n",
        fifo.display()
    );
    let gw = gateway(&pool, &audit);
    const CALLS: u64 = 40;
    for i in 0..CALLS {
        let r = mcp_call(
            gw.mcp_addr,
            i as i64,
            "echo",
            json!({"text": "hi"}),
            json!({}),
            None,
            json!({}),
        );
        assert_eq!(r.status, 200, "call {i}: {}", r.text());
    }
    // The writer holds one record (waiting to open the FIFO), the queue one: the rest dropped.
    let dropped = |gw: &RunningGateway| {
        sample(
            &scrape(gw),
            "mcp_edge_audit_dropped_total",
            &["why=\"queue_full\""],
        )
    };
    assert!(
        eventually(Duration::from_secs(10), || dropped(&gw)
            == (CALLS - 2) as f64),
        "dropped {}",
        dropped(&gw)
    );
    assert_eq!(written(&gw), 0.0);
    // A reader comes: the two records kept are written, nothing was lost uncounted.
    let reader = std::fs::File::open(&fifo).unwrap();
    let mut lines = std::io::BufReader::new(reader).lines();
    for _ in 0..2 {
        let line = lines.next().unwrap().unwrap();
        let r: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(
            (&r["name"], &r["outcome"]),
            (&json!("echo"), &json!("result")),
            "{r}"
        );
    }
    assert!(eventually(Duration::from_secs(10), || written(&gw) == 2.0));
    assert_eq!(written(&gw) + dropped(&gw), CALLS as f64);
    drop(gw);
    std::fs::remove_dir_all(&dir).unwrap();
}

mod otlp;
mod records;

#[test]
fn a_flow_left_after_its_first_leg_is_recorded_abandoned_and_an_error_fails_one() {
    let dir = scratch("abandon");
    let path = dir.join("audit.jsonl");
    let pool = Pool::start(PoolOptions::local(1)).unwrap();
    let cfg = config(
        &[("mrtr", pool.addrs(), "balance: round_robin")],
        &format!(
            "default_route: {{pool: mrtr}}\nflows: {{timeout: 1s}}\naudit:\n  sink: file\n  file: {{path: {}}}\n",
            path.display()
        ),
    );
    let gw = RunningGateway::start(cfg).unwrap();
    let elicit = json!({"elicitation": {}});
    let first = |id: i64| {
        let r = mcp_call(
            gw.mcp_addr,
            id,
            "create_repo",
            json!({"repo": "x"}),
            elicit.clone(),
            Some("alice"),
            json!({}),
        );
        assert_eq!(r.status, 200, "{}", r.text());
        r.json()["result"].clone()
    };
    let left = first(1);
    assert_eq!(left["resultType"], "input_required");
    // The second flow's retry comes from another caller: the server refuses its state, and
    // the flow fails.
    let failing = first(2);
    let state = failing["requestState"].clone();
    let extra = json!({"inputResponses": {"github_login": {"action": "accept", "content": {"name": "o"}}}, "requestState": state});
    let r = mcp_call(
        gw.mcp_addr,
        3,
        "create_repo",
        json!({"repo": "x"}),
        elicit.clone(),
        Some("bob"),
        extra,
    );
    assert!(r.json().get("error").is_some(), "{}", r.text());
    // A scrape sweeps the flows whose timeout passed.
    let flows = |outcome: &str| {
        records(&path)
            .into_iter()
            .filter(|r| r["kind"] == "flow" && r["outcome"] == outcome)
            .collect::<Vec<_>>()
    };
    let done = eventually(Duration::from_secs(10), || {
        scrape(&gw);
        !flows("abandoned").is_empty() && !flows("failed").is_empty()
    });
    assert!(done, "{:?}", records(&path));
    let (a, f) = (&flows("abandoned")[0], &flows("failed")[0]);
    assert_eq!(
        (&a["name"], &a["rounds"]),
        (&json!("create_repo"), &json!(1)),
        "{a}"
    );
    assert_eq!(f["rounds"], 2, "{f}");
    let legs = |id: &Value| {
        records(&path)
            .into_iter()
            .filter(|r| r["kind"] == "call" && &r["flow_id"] == id)
            .count()
    };
    assert_eq!((legs(&a["flow_id"]), legs(&f["flow_id"])), (1, 2));
    drop(gw);
    std::fs::remove_dir_all(&dir).unwrap();
}
