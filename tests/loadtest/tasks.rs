//! The load tester's `tasks` scenario through the gateway in front of three separate
//! `mcp-edge backend` processes (no shared store: each task lives in the process that created
//! it). The report's counts must equal what the gateway's own metrics say (tasks created and
//! ended by tool, task requests routed to the owner), every task must end (created =
//! completed + cancelled + failed), and every task request must land on the owner. Bounded in
//! flows and time, on 127.0.0.1.

use crate::support::config;
use crate::support::metrics::{sample, scrape};
use crate::support::spawn::fleet;

use mcp_edge::gateway::RunningGateway;
use mcp_edge::loadtest::task_measure::TaskReq;
use mcp_edge::loadtest::{execute, LoadTestArgs};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tasks_scenario_agrees_with_the_gateways_metrics() {
    let (_procs, addrs) = fleet(3, None);
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
            sample(m, "mcp_edge_tasks_created_total", &[&label]) as u64,
            op.legs.requests,
            "{tool}\n{text}\n{m}"
        );
    }
    assert_eq!(
        sample(m, "mcp_edge_tasks_created_total", &[]) as u64,
        t.created
    );
    for (status, n) in [
        ("completed", t.completed),
        ("cancelled", t.cancelled),
        ("failed", t.failed),
    ] {
        let st = format!("status=\"{status}\"");
        assert_eq!(
            sample(m, "mcp_edge_tasks_ended_total", &[&st]) as u64,
            n,
            "{status}\n{text}\n{m}"
        );
    }
    assert_eq!(
        sample(m, "mcp_edge_tasks_ended_total", &["tool=\"_unknown\""]) as u64,
        0
    );
    assert_eq!(sample(m, "mcp_edge_tasks_evicted_total", &[]) as u64, 0);
    assert_eq!(
        sample(m, "mcp_edge_task_routing_total", &["result=\"owner\""]) as u64,
        t.requests(),
        "{m}"
    );
    assert_eq!(
        sample(m, "mcp_edge_task_routing_total", &[]) as u64,
        t.requests(),
        "{m}"
    );
    gw.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_past_its_limit_is_cancelled_and_counted_abandoned() {
    // Straight to one backend process: the instance comes from result `_meta` here.
    let (_procs, addrs) = fleet(1, None);
    let dir = std::env::temp_dir().join(format!("mcp-edge-lt-tasks-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("long.yaml");
    std::fs::write(
        &file,
        "name: long\nflows:\n  - tool: slow_compute\n    arguments: {seconds: 60}\n    tasks: true\n",
    )
    .unwrap();
    let url = format!("http://{}/mcp", addrs[0]);
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
