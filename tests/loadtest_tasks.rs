//! The load tester's `tasks` scenario through the gateway in front of three separate
//! `mcp-edge backend` processes (no shared store: each task lives in the process that created
//! it). The report's counts must equal what the gateway's own metrics say (tasks created and
//! ended by tool, task requests routed to the owner), every task must end (created =
//! completed + cancelled + failed), and every task request must land on the owner. Bounded in
//! flows and time, on 127.0.0.1.

mod support;

use support::http::raw;
use support::spawn::{backend, Procs};
use support::{config, free_port};

use mcp_edge::gateway::RunningGateway;
use mcp_edge::loadtest::task_measure::TaskReq;
use mcp_edge::loadtest::{execute, LoadTestArgs};
use std::net::SocketAddr;

fn scrape(gw: &RunningGateway) -> String {
    let r = raw(
        gw.admin_addr.unwrap(),
        b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n",
    );
    String::from_utf8(r.body).unwrap()
}

/// The sum of the samples of `name` whose label set contains every one of `labels`.
fn sum(metrics: &str, name: &str, labels: &[&str]) -> u64 {
    metrics
        .lines()
        .filter(|l| l.split(['{', ' ']).next() == Some(name))
        .filter(|l| labels.iter().all(|f| l.contains(f)))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tasks_scenario_agrees_with_the_gateways_metrics() {
    let ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let _procs = Procs(ports.iter().map(|p| backend(*p, None)).collect());
    let addrs: Vec<SocketAddr> = ports
        .iter()
        .map(|p| format!("127.0.0.1:{p}").parse().unwrap())
        .collect();
    let cfg = config(
        &[("default", &addrs, "balance: round_robin")],
        "default_route: {pool: default}\n",
    );
    let gw = RunningGateway::start(cfg).unwrap();
    let url = format!("http://{}/mcp", gw.mcp_addr);
    let args = LoadTestArgs::from_cli([
        "--target",
        &url,
        "--scenario",
        "tasks",
        "--flows",
        "24",
        "--concurrency",
        "6",
        "--task-cancel-share",
        "0.3",
        "--timeout",
        "20s",
        "--duration",
        "120s",
        "--quiet",
    ])
    .unwrap();
    let report = execute(&args).await.unwrap();
    let t = &report.measures.tasks;
    let text = report.summary_text();

    // Every flow created a task, and every task ended, none lost or given up.
    assert_eq!(t.created, 24, "{text}");
    assert_eq!(t.created, t.completed + t.cancelled + t.failed, "{text}");
    assert_eq!((t.abandoned, t.errors, t.tool_errors), (0, 0, 0), "{text}");
    assert_eq!(report.errors(), 0, "{text}");
    assert!(t.completed > 0, "{text}");
    // 24 draws at 30%: none cancelled has probability 0.7^24 < 0.02%.
    assert!(t.cancelled > 0, "{text}");
    // deploy_async asked for its confirmation: answered through tasks/update.
    assert!(t.req(TaskReq::Update).requests > 0, "{text}");
    assert_eq!(t.req(TaskReq::Cancel).requests, t.cancelled, "{text}");
    assert_eq!(t.polls.len(), t.created, "{text}");
    // Without a shared store, every task request must reach its owner.
    let all = t.landing_all();
    assert_eq!((all.other, all.unknown), (0, 0), "{text}");
    assert_eq!(all.owner, t.requests(), "{text}");
    assert_eq!(all.owner_share(), Some(1.0), "{text}");
    assert!(text.contains("Tasks\n"), "{text}");
    assert!(text.contains("100.0% ("), "{text}");

    // The gateway's own counts are the same, by tool.
    let gw_metrics = scrape(&gw);
    let m = gw_metrics.as_str();
    let ops = report.operations();
    for tool in ["deploy_async", "slow_compute"] {
        let label = format!("tool=\"{tool}\"");
        let op = ops
            .iter()
            .find(|o| o.label == format!("tools/call {tool}"))
            .unwrap();
        assert_eq!(
            sum(m, "mcp_edge_tasks_created_total", &[&label]),
            op.legs.requests,
            "{tool}\n{text}\n{m}"
        );
    }
    assert_eq!(sum(m, "mcp_edge_tasks_created_total", &[]), t.created);
    for (status, n) in [
        ("completed", t.completed),
        ("cancelled", t.cancelled),
        ("failed", t.failed),
    ] {
        let st = format!("status=\"{status}\"");
        assert_eq!(
            sum(m, "mcp_edge_tasks_ended_total", &[&st]),
            n,
            "{status}\n{text}\n{m}"
        );
    }
    assert_eq!(
        sum(m, "mcp_edge_tasks_ended_total", &["tool=\"_unknown\""]),
        0
    );
    assert_eq!(sum(m, "mcp_edge_tasks_evicted_total", &[]), 0);
    assert_eq!(
        sum(m, "mcp_edge_task_routing_total", &["result=\"owner\""]),
        t.requests(),
        "{m}"
    );
    assert_eq!(
        sum(m, "mcp_edge_task_routing_total", &[]),
        t.requests(),
        "{m}"
    );
    gw.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_past_its_limit_is_cancelled_and_counted_abandoned() {
    // Straight to one backend process: the instance comes from result `_meta` here.
    let port = free_port();
    let _procs = Procs(vec![backend(port, None)]);
    let dir = std::env::temp_dir().join(format!("mcp-edge-lt-tasks-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("long.yaml");
    std::fs::write(
        &file,
        "name: long\nflows:\n  - tool: slow_compute\n    arguments: {seconds: 60}\n    tasks: true\n",
    )
    .unwrap();
    let url = format!("http://127.0.0.1:{port}/mcp");
    let args = LoadTestArgs::from_cli([
        "--target",
        &url,
        "--scenario",
        file.to_str().unwrap(),
        "--flows",
        "2",
        "--concurrency",
        "2",
        "--task-limit",
        "1500ms",
        "--task-cancel-share",
        "0",
        "--timeout",
        "20s",
        "--quiet",
    ])
    .unwrap();
    let started = std::time::Instant::now();
    let report = execute(&args).await.unwrap();
    let t = &report.measures.tasks;
    let text = report.summary_text();
    assert!(
        started.elapsed() < std::time::Duration::from_secs(30),
        "{text}"
    );
    assert_eq!((t.created, t.abandoned, t.completed), (2, 2, 0), "{text}");
    // Given up means told to the server: one tasks/cancel each.
    assert_eq!(t.req(TaskReq::Cancel).requests, 2, "{text}");
    assert!(t.req(TaskReq::Get).requests >= 4, "{text}");
    assert_eq!(report.measures.flows_failed, 2, "{text}");
    assert!(report.errors() >= 2, "abandoned tasks are errors: {text}");
    assert!(
        !report.check(&args).is_empty(),
        "the run fails its error rate"
    );
    let all = t.landing_all();
    assert_eq!(
        (all.owner, all.other, all.unknown),
        (t.requests(), 0, 0),
        "{text}"
    );
    assert!(text.contains("2 abandoned"), "{text}");
    let json = report.to_json();
    assert_eq!(json["tasks"]["abandoned"], 2);
    assert_eq!(json["tasks"]["landing"]["all"]["owner_share"], 1.0);
    assert!(report.to_html().contains("<h2>Tasks</h2>"));
}
