//! The load tester against the real thing: three reference backend instances behind the
//! gateway on loopback. Retry legs land across instances and complete; a pool whose instances
//! do not share a state key (a stateful pool in disguise) is caught; `mcp-edge demo` runs end
//! to end (its tasks phase's counts equal the gateway's) and writes its reports.

use crate::support::*;
use mcp_edge::backend::{Pool, PoolOptions, StateKeys};
use mcp_edge::gateway::RunningGateway;
use mcp_edge::loadtest::{self, LoadTestArgs};
use std::net::SocketAddr;

fn gateway_for(addrs: &[SocketAddr]) -> RunningGateway {
    let cfg = config(
        &[("default", addrs, "balance: round_robin")],
        "default_route: {pool: default}\n",
    );
    RunningGateway::start(cfg).unwrap()
}

fn run(args: &LoadTestArgs) -> loadtest::Report {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(loadtest::execute(args)).unwrap()
}

fn args(gw: &RunningGateway, flows: u64, extra: &[&str]) -> LoadTestArgs {
    let target = format!("http://{}/mcp", gw.mcp_addr);
    let mut argv = vec!["--target", &target, "--flows", &flows.to_string()]
        .into_iter()
        .map(String::from)
        .collect::<Vec<_>>();
    argv.extend(extra.iter().map(|s| s.to_string()));
    argv.extend(["--duration", "20s", "--quiet"].map(String::from));
    LoadTestArgs::from_cli(argv).unwrap()
}

#[test]
fn mrtr_flows_complete_through_the_gateway_with_retries_on_other_instances() {
    let pool = Pool::start(PoolOptions::local(3)).unwrap();
    let gw = gateway_for(pool.addrs());
    let a = args(
        &gw,
        600,
        &[
            "--scenario",
            "mrtr",
            "--concurrency",
            "8",
            "--expect-cross-instance",
            "0.5",
            "--max-error-rate",
            "0",
        ],
    );
    let r = run(&a);
    let m = &r.measures;
    assert_eq!(r.errors(), 0, "{}", r.summary_text());
    assert_eq!(m.flows_completed, 600);
    assert_eq!(m.flows_failed + m.flows_abandoned, 0);
    // Every retry leg was served by a named instance; with round robin over three instances
    // and interleaved flows, about two thirds land elsewhere than their first leg.
    assert_eq!(m.landing.retry_unknown, 0);
    let cross = r.cross_instance_fraction().unwrap();
    assert!((0.5..=0.9).contains(&cross), "cross-instance share {cross}");
    let mut names: Vec<String> = pool.addrs().iter().map(|a| a.to_string()).collect();
    names.sort();
    assert_eq!(
        m.landing.instances.keys().cloned().collect::<Vec<_>>(),
        names
    );
    for (inst, c) in &m.landing.instances {
        assert!(c.retry > 100, "{inst} served only {} retry legs", c.retry);
    }
    // The multi-round flow (onboard) took three legs.
    assert!(m.rounds.get(&3).copied().unwrap_or(0) > 0, "{:?}", m.rounds);
    assert!(r.check(&a).is_empty(), "{:?}", r.check(&a));
}

#[test]
fn a_pool_without_a_shared_key_fails_retry_legs_and_the_check() {
    // Three single-instance pools with different keys: each instance only trusts itself.
    let pools: Vec<Pool> = (0..3)
        .map(|_| Pool::start(PoolOptions::local(1).with_key(StateKeys::random())).unwrap())
        .collect();
    let addrs: Vec<SocketAddr> = pools.iter().map(|p| p.addrs()[0]).collect();
    let gw = gateway_for(&addrs);
    let a = args(
        &gw,
        150,
        &[
            "--scenario",
            "create_repo",
            "--concurrency",
            "4",
            "--max-error-rate",
            "0",
        ],
    );
    let r = run(&a);
    let retry_errors = r.measures.legs[1].errors;
    assert!(
        retry_errors > 30,
        "retries landing elsewhere must fail: {}",
        r.summary_text()
    );
    assert!(
        r.measures.errors_by_code.contains_key(&-32602),
        "{:?}",
        r.measures.errors_by_code
    );
    let failed = r.check(&a);
    assert!(
        failed.iter().any(|f| f.contains("error rate")),
        "{failed:?}"
    );
}

#[test]
fn spoofed_headers_are_refused_by_the_gateway_and_counted_as_expected() {
    let pool = Pool::start(PoolOptions::local(2)).unwrap();
    let gw = gateway_for(pool.addrs());
    let r = run(&args(
        &gw,
        300,
        &[
            "--scenario",
            "mixed",
            "--bad-share",
            "0.2",
            "--max-error-rate",
            "0",
        ],
    ));
    let m = &r.measures;
    assert!(m.bad_sent > 20, "{}", m.bad_sent);
    assert_eq!(
        m.bad_rejected, m.bad_sent,
        "every spoofed request is refused with 400/-32020"
    );
    assert_eq!(r.errors(), 0, "{}", r.summary_text());
}

#[test]
fn the_demo_runs_end_to_end_and_writes_its_reports() {
    let dir = std::env::temp_dir().join(format!("mcp-edge-demo-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (b1, b2, b3) = (free_port(), free_port(), free_port());
    let cfg = format!(
        "work_stealing: true\nlisten:\n  mcp: 127.0.0.1:{}\n  admin: 127.0.0.1:{}\npools:\n  default:\n    instances: [127.0.0.1:{b1}, 127.0.0.1:{b2}, 127.0.0.1:{b3}]\ndefault_route: {{pool: default}}\n",
        free_port(),
        free_port()
    );
    let file = dir.join("gateway.yaml");
    std::fs::write(&file, cfg).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mcp-edge"))
        .args(["demo", "--duration", "2s", "--concurrency", "4", "--config"])
        .arg(&file)
        .arg("--report-dir")
        .arg(&dir)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("demo passed"), "{stdout}");
    assert!(stdout.contains("spoofed headers refused"), "{stdout}");
    // The tasks phase: 12 tasks, and the gateway counted what the load tester saw.
    let table = stdout
        .split("Tasks                        load tester   gateway\n")
        .nth(1)
        .expect("the tasks table");
    let rows: Vec<(String, u64, u64)> = table
        .lines()
        .take_while(|l| l.starts_with("  "))
        .map(|l| {
            let cells: Vec<&str> = l.split_whitespace().collect();
            let n = cells.len();
            let label = cells[..n - 2].join(" ");
            (
                label,
                cells[n - 2].parse().unwrap(),
                cells[n - 1].parse().unwrap(),
            )
        })
        .collect();
    assert_eq!(rows.len(), 5, "{stdout}");
    assert_eq!(rows[0], ("created".to_string(), 12, 12), "{stdout}");
    for (label, ours, theirs) in &rows {
        assert_eq!(ours, theirs, "{label}: {stdout}");
    }
    let html = std::fs::read_to_string(dir.join("demo.html")).unwrap();
    assert!(html.contains("<svg"));
    assert!(
        !html.contains("http://") && !html.contains("https://"),
        "the report must load nothing from the network"
    );
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("demo.json")).unwrap()).unwrap();
    assert_eq!(json["schema"], "mcp-edge.loadtest/v1");
    let _ = std::fs::remove_dir_all(&dir);
}
