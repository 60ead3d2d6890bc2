//! The load tester against fleets that are not the reference backend: servers written with the
//! official TypeScript SDK v2 and Python SDK (tests/peers), several instances sharing one
//! requestState key, behind the gateway on loopback. `--scenario auto` and a one-liner: every
//! flow completes, retry legs cross instances, the content checks pass.

use crate::peers::{Peer, Sdk};
use crate::support::config;
use mcp_edge::gateway::RunningGateway;
use mcp_edge::loadtest::measure::LegKind;
use mcp_edge::loadtest::{self, LoadTestArgs, Report};

/// Every retry leg is sent to another instance than its previous leg (`retry_landing:
/// elsewhere`): round robin alone lands a retry back where it started whenever the workers
/// happen to move in step, which made the cross-instance share a matter of scheduling.
fn gateway_for(fleet: &[Peer]) -> RunningGateway {
    let addrs: Vec<_> = fleet.iter().map(|p| p.addr).collect();
    let pool = "balance: round_robin\n    mrtr: {retry_landing: elsewhere}";
    let cfg = config(
        &[("default", &addrs, pool)],
        "default_route: {pool: default}\n",
    );
    RunningGateway::start(cfg).unwrap()
}

fn run(gw: &RunningGateway, extra: &[&str]) -> (LoadTestArgs, Report) {
    let target = format!("http://{}/mcp", gw.mcp_addr);
    let mut argv: Vec<String> = [
        "--target",
        &target,
        "--duration",
        "60s",
        "--timeout",
        "10s",
        "--quiet",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    argv.extend(extra.iter().map(|s| s.to_string()));
    let a = LoadTestArgs::from_cli(argv).unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let r = rt.block_on(loadtest::execute(&a)).unwrap();
    (a, r)
}

/// Every flow completed, retries crossed instances, every check ran and passed.
fn assert_clean(a: &LoadTestArgs, r: &Report, flows: u64, min_cross: f64) {
    let m = &r.measures;
    assert_eq!(r.errors(), 0, "{}", r.summary_text());
    assert_eq!(m.flows_completed, flows, "{}", r.summary_text());
    assert!(
        m.leg(LegKind::Retry).requests > 0,
        "no MRTR flow ran: {}",
        r.summary_text()
    );
    assert_eq!(
        m.landing.retry_unknown, 0,
        "the gateway names the instance of every leg"
    );
    let cross = r.cross_instance_fraction().unwrap();
    assert!(
        cross >= min_cross,
        "cross-instance share {cross}: {}",
        r.summary_text()
    );
    let (run, failed) = m.tally.check_totals();
    assert!(run > 0, "content checks ran");
    assert_eq!(failed, 0, "{}", r.summary_text());
    let failures = r.check(a);
    assert!(failures.is_empty(), "{failures:?}");
}

#[test]
fn ts_sdk_fleet_scenario_auto_through_the_gateway() {
    if !crate::peers::installed(Sdk::TypeScript) {
        return;
    }
    let fleet = Peer::fleet(Sdk::TypeScript, 3);
    let gw = gateway_for(&fleet);
    let (a, r) = run(
        &gw,
        &[
            "--scenario",
            "auto",
            "--flows",
            "120",
            "--concurrency",
            "4",
            "--expect-cross-instance",
            "0.3",
        ],
    );
    assert_clean(&a, &r, 120, 0.9);
    let d = r.discovery.as_ref().expect("preflight ran");
    assert_eq!(d.server_name.as_deref(), Some("ts-peer"));
    assert_eq!(
        r.excluded,
        [("wipe".to_string(), "destructive (destructiveHint)")]
    );
    let ops: Vec<String> = r.operations().iter().map(|o| o.label.clone()).collect();
    assert_eq!(
        ops,
        ["tools/call add", "tools/call forecast", "tools/call book"]
    );
    // add declares an outputSchema: its structuredContent was checked against it.
    assert!(r
        .measures
        .tally
        .checks
        .contains_key("tools/call add: structuredContent matches outputSchema"));
}

#[test]
fn ts_sdk_fleet_one_liner_with_a_feed_checks_and_a_header() {
    if !crate::peers::installed(Sdk::TypeScript) {
        return;
    }
    let fleet = Peer::fleet(Sdk::TypeScript, 2);
    let gw = gateway_for(&fleet);
    let feed = std::env::temp_dir().join(format!("mcp-edge-rooms-{}.csv", std::process::id()));
    std::fs::write(&feed, "room,guest\nblue-1,ann\ngreen-2,bo\n").unwrap();
    let (a, r) = run(
        &gw,
        &[
            "--tool",
            "book",
            "--args",
            r#"{"room": "$feed.room"}"#,
            "--answer",
            "confirm=true",
            "--answer",
            "guest=ann",
            "--feed",
            feed.to_str().unwrap(),
            "-H",
            "X-Tenant: acme",
            "--check",
            "no-error",
            "--check",
            "/content/0/text=~^booked (blue-1|green-2) for ann",
            "--flows",
            "60",
            "--concurrency",
            "3",
            "--expect-cross-instance",
            "0.2",
        ],
    );
    let _ = std::fs::remove_file(&feed);
    assert_clean(&a, &r, 60, 0.9);
    assert_eq!(
        r.measures.rounds.get(&2),
        Some(&60),
        "every booking took one retry leg"
    );
    let c = &r.measures.tally.checks;
    assert_eq!(c.len(), 2);
    assert!(c.values().all(|c| c.passed == 60), "{c:?}");
}

#[test]
fn python_sdk_fleet_scenario_auto_through_the_gateway() {
    if !crate::peers::installed(Sdk::Python) {
        return;
    }
    let fleet = Peer::fleet(Sdk::Python, 2);
    let gw = gateway_for(&fleet);
    let (a, r) = run(
        &gw,
        &[
            "--scenario",
            "auto",
            "--flows",
            "80",
            "--concurrency",
            "4",
            "--expect-cross-instance",
            "0.3",
        ],
    );
    assert_clean(&a, &r, 80, 0.9);
    assert_eq!(
        r.discovery.as_ref().unwrap().server_name.as_deref(),
        Some("py-peer")
    );
    assert_eq!(r.excluded.len(), 1);
    assert_eq!(r.excluded[0].0, "drop_table");
}

#[test]
fn python_sdk_fleet_one_liner_with_templates() {
    if !crate::peers::installed(Sdk::Python) {
        return;
    }
    let fleet = Peer::fleet(Sdk::Python, 3);
    let gw = gateway_for(&fleet);
    let (a, r) = run(
        &gw,
        &[
            "--tool",
            "order",
            "--args",
            r#"{"item": "tea-$seq"}"#,
            "--answer",
            "confirm=true",
            "--answer",
            "note=fast",
            "--check",
            "/content/0/text=~^ordered tea-[0-9]+ \\(fast\\)$",
            "--flows",
            "60",
            "--concurrency",
            "3",
            "--expect-cross-instance",
            "0.3",
        ],
    );
    assert_clean(&a, &r, 60, 0.9);
    assert_eq!(r.measures.rounds.get(&2), Some(&60));
}

/// Declined and cancelled elicitations end their flows the way each SDK ends them (a tool
/// error), which is the expected end of such a flow, not an error.
fn declines_and_cancels(sdk: Sdk, tool: &str, args: &str) {
    if !crate::peers::installed(sdk) {
        return;
    }
    let fleet = Peer::fleet(sdk, 2);
    let gw = gateway_for(&fleet);
    let (a, r) = run(
        &gw,
        &[
            "--tool",
            tool,
            "--args",
            args,
            "--decline-share",
            "0.3",
            "--cancel-share",
            "0.2",
            "--flows",
            "60",
            "--concurrency",
            "3",
        ],
    );
    let t = &r.measures.tally;
    assert_eq!(r.errors(), 0, "{}", r.summary_text());
    assert_eq!(r.measures.flows_completed, 60, "{}", r.summary_text());
    assert!(
        t.declined > 5 && t.cancelled > 2,
        "{} declined, {} cancelled",
        t.declined,
        t.cancelled
    );
    assert!(r.check(&a).is_empty(), "{:?}", r.check(&a));
}

#[test]
fn ts_sdk_fleet_declines_and_cancels() {
    declines_and_cancels(Sdk::TypeScript, "book", r#"{"room": "r-$seq"}"#);
}

#[test]
fn python_sdk_fleet_declines_and_cancels() {
    declines_and_cancels(Sdk::Python, "order", r#"{"item": "i-$seq"}"#);
}

#[test]
fn ts_sdk_fleet_refuses_the_default_scenario_before_any_load() {
    if !crate::peers::installed(Sdk::TypeScript) {
        return;
    }
    let fleet = Peer::fleet(Sdk::TypeScript, 2);
    let gw = gateway_for(&fleet);
    let target = format!("http://{}/mcp", gw.mcp_addr);
    // The issue's first run: the built-in `mixed` scenario against a fleet without those tools.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mcp-edge"))
        .args(["loadtest", "--target", &target, "--duration", "5s"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("preflight: server ts-peer 1.0.0 · protocol 2026-07-28"),
        "{stderr}"
    );
    assert!(
        stderr.contains("x-mcp-header params: forecast (region→Mcp-Param-Region)"),
        "{stderr}"
    );
    assert!(
        stderr.contains("does not offer: charge, create_repo, deploy, echo, onboard")
            && stderr.contains("The target offers 4: add, forecast, book, wipe"),
        "{stderr}"
    );
}
