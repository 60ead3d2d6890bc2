//! Retry landing (`pools.<name>.mrtr.retry_landing`) and `--scenario auto` against the
//! reference backend, over real sockets: the shipped gateway.yaml in front of two backend
//! instances passes the README's `--expect-cross-instance 0.5` because every retry leg leaves
//! its previous instance (and the load tester reads the gateway's header saying so); without
//! the option nothing is steered or claimed; the auto scenario leaves out the backend's tools
//! that fail by design and exits 0; the mrtr scenario completes through a gateway sealing the
//! pool's states (`mrtr.seal`).

use crate::support::*;
use mcp_edge::backend::{Pool, PoolOptions};
use mcp_edge::config::Config;
use mcp_edge::gateway::RunningGateway;
use mcp_edge::loadtest::{self, LoadTestArgs};
use std::net::SocketAddr;

/// The shipped gateway.yaml, on free ports, with `instances` as its default pool.
fn shipped_config(instances: &[SocketAddr]) -> Config {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/gateway.yaml");
    let text = std::fs::read_to_string(path).unwrap();
    let list: Vec<String> = instances.iter().map(|a| a.to_string()).collect();
    let shipped_instances = "[127.0.0.1:7001, 127.0.0.1:7002, 127.0.0.1:7003]";
    assert!(text.contains(shipped_instances), "gateway.yaml changed");
    let text = text
        .replace("127.0.0.1:8080", &format!("127.0.0.1:{}", free_port()))
        .replace("127.0.0.1:9090", &format!("127.0.0.1:{}", free_port()))
        .replace(shipped_instances, &format!("[{}]", list.join(", ")));
    // Work stealing: tests start many gateways in one process (see the config docs).
    Config::parse(&format!("work_stealing: true\n{text}"), "gateway.yaml").unwrap()
}

fn run(gw: &RunningGateway, extra: &[&str]) -> (loadtest::Report, LoadTestArgs) {
    let target = format!("http://{}/mcp", gw.mcp_addr);
    let mut argv: Vec<String> = ["--target", &target, "--duration", "20s", "--quiet"]
        .map(String::from)
        .to_vec();
    argv.extend(extra.iter().map(|s| s.to_string()));
    let args = LoadTestArgs::from_cli(argv).unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    (rt.block_on(loadtest::execute(&args)).unwrap(), args)
}

#[test]
fn the_shipped_config_sends_every_retry_leg_to_the_other_of_two_instances() {
    let pool = Pool::start(PoolOptions::local(2)).unwrap();
    let gw = RunningGateway::start(shipped_config(pool.addrs())).unwrap();
    let (r, args) = run(
        &gw,
        &[
            "--flows",
            "300",
            "--concurrency",
            "8",
            "--expect-cross-instance",
            "0.5",
            "--max-error-rate",
            "0",
        ],
    );
    let m = &r.measures;
    assert!(r.check(&args).is_empty(), "{}", r.summary_text());
    assert_eq!(r.errors(), 0, "{}", r.summary_text());
    let retry_legs = m.landing.retry_known;
    assert!(retry_legs > 100, "{}", r.summary_text());
    assert_eq!(m.landing.retry_unknown, 0);
    // The gateway said it steered every retry leg elsewhere...
    assert_eq!(m.landing.steered.get("elsewhere"), Some(&retry_legs));
    assert_eq!(m.landing.steered.len(), 1, "{:?}", m.landing.steered);
    // ...and the instances named on the legs agree: with two instances, every retry leg
    // crossed from leg 1 except the third leg of a three-leg flow (onboard), which leaves leg
    // 2's instance for leg 1's.
    let three_leg_flows = m.rounds.get(&3).copied().unwrap_or(0);
    assert!(three_leg_flows > 0, "{:?}", m.rounds);
    assert_eq!(m.landing.cross, retry_legs - three_leg_flows);
    let text = r.summary_text();
    assert!(text.contains("mrtr.retry_landing: elsewhere"), "{text}");
}

#[test]
fn without_the_option_retry_legs_are_balanced_and_nothing_is_claimed() {
    let pool = Pool::start(PoolOptions::local(2)).unwrap();
    let cfg = config(
        &[("default", pool.addrs(), "balance: least_loaded")],
        "default_route: {pool: default}\n",
    );
    let gw = RunningGateway::start(cfg).unwrap();
    let (r, _) = run(
        &gw,
        &["--flows", "200", "--concurrency", "8", "--scenario", "mrtr"],
    );
    let m = &r.measures;
    assert_eq!(r.errors(), 0, "{}", r.summary_text());
    assert_eq!(m.flows_completed, 200);
    // Retry legs landed on named instances, and the gateway claimed no steering.
    assert!(m.landing.retry_known > 100);
    assert!(m.landing.steered.is_empty(), "{:?}", m.landing.steered);
    assert!(!r.summary_text().contains("retry_landing"));
}

#[test]
fn auto_scenario_against_the_reference_backend_leaves_out_tools_failing_by_design() {
    let pool = Pool::start(PoolOptions::local(2)).unwrap();
    let gw = RunningGateway::start(shipped_config(pool.addrs())).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mcp-edge"))
        .args(["loadtest", "--scenario", "auto", "--flows", "400"])
        .args(["--max-error-rate", "0", "--target"])
        .arg(format!("http://{}/mcp", gw.mcp_addr))
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains(" 0 errors (0.000%)"), "{stdout}");
    for tool in ["test_error_handling", "protocol_error_job"] {
        let said = format!("{tool} (fails by design");
        assert!(stdout.contains(&said), "{tool} not reported: {stdout}");
        assert!(!stdout.contains(&format!("tools/call {tool} ")), "{stdout}");
    }
    // A tool that answers is load-tested.
    assert!(stdout.contains("tools/call echo "), "{stdout}");
}

/// `mrtr.seal` on the pool (its own state already protected: the gateway seals it again),
/// `one_time: local`, retry legs sent elsewhere: every flow of the mrtr scenario completes, every
/// retry leg's state was sealed by the gateway and opened again, none refused.
#[test]
fn mrtr_flows_complete_through_a_sealing_gateway_across_instances() {
    let pool = Pool::start(PoolOptions::local(2)).unwrap();
    let keys = std::env::temp_dir().join(format!("mcp-edge-lt-seal-{}", std::process::id()));
    std::fs::write(&keys, format!("{}\n", "ab".repeat(32))).unwrap();
    let extra = format!(
        "balance: round_robin\n    mrtr:\n      retry_landing: elsewhere\n      seal: {{key_file: {}, one_time: local}}",
        keys.display()
    );
    let cfg = config(
        &[("default", pool.addrs(), &extra)],
        "default_route: {pool: default}\n",
    );
    let gw = RunningGateway::start(cfg).unwrap();
    let (r, args) = run(
        &gw,
        &[
            "--flows",
            "200",
            "--concurrency",
            "8",
            "--scenario",
            "mrtr",
            "--expect-cross-instance",
            "0.5",
            "--max-error-rate",
            "0",
        ],
    );
    let m = &r.measures;
    assert!(r.check(&args).is_empty(), "{}", r.summary_text());
    assert_eq!(r.errors(), 0, "{}", r.summary_text());
    assert_eq!(m.flows_completed, 200);
    let retry_legs = m.landing.retry_known;
    assert!(retry_legs >= 200, "{}", r.summary_text());
    let metrics = scrape(&gw);
    let opened = format!(r#"mcp_edge_mrtr_states_opened_total{{pool="default"}} {retry_legs}"#);
    assert!(metrics.contains(&opened), "{opened} not in {metrics}");
    assert!(
        !metrics.contains("mcp_edge_mrtr_state_refusals_total{"),
        "{metrics}"
    );
    std::fs::remove_file(keys).unwrap();
}
