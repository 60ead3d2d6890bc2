//! `mcp-edge demo`: the whole product in one command.
//!
//! Starts a reference backend pool on the loopback instances the config names (three, from the
//! embedded `gateway.yaml`, sharing one state key), the gateway in front of them, and a short
//! MRTR load test through the gateway; prints the load test's summary, what the gateway saw
//! (from its own `/metrics`), then a short Tasks-extension phase (the `tasks` scenario, its
//! counts beside the gateway's), and the paths of the HTML and JSON reports; then stops
//! everything.

use anyhow::Context;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::backend::{Pool, PoolOptions, StateKeys};
use crate::config::{Config, EMBEDDED_DEFAULT};
use crate::gateway::runtime::server::RunningGateway;
use crate::loadtest::LoadTestArgs;

/// CLI options of `mcp-edge demo`.
#[derive(clap::Args, Debug, Clone)]
pub struct DemoArgs {
    /// A gateway config to use instead of the embedded default (the repository's gateway.yaml).
    /// Every loopback instance it names gets a backend instance.
    #[arg(long, short)]
    pub config: Option<PathBuf>,
    /// How long the load test runs.
    #[arg(long, default_value = "10s", value_parser = crate::config::parse_duration)]
    pub duration: Duration,
    /// Concurrent MRTR flows (closed loop).
    #[arg(long, default_value_t = 16)]
    pub concurrency: usize,
    /// Share of deliberately spoofed requests (Mcp-Name disagreeing with the body) that the
    /// gateway must refuse with 400 / -32020.
    #[arg(long, default_value_t = 0.02)]
    pub bad_share: f64,
    /// After the run, keep the gateway and the backends serving until Ctrl-C, to look around
    /// in the console (`http://<admin>/ui`).
    #[arg(long)]
    pub keep_serving: bool,
    /// Where the HTML and JSON reports go.
    #[arg(long, default_value = "reports")]
    pub report_dir: PathBuf,
    /// Tasks-extension flows of the short tasks phase after the MRTR load test (0: none).
    #[arg(long, default_value_t = 12)]
    pub task_flows: u64,
}

/// Run the demo; Ok(true) when every check of the load test passed.
pub fn run(args: DemoArgs) -> anyhow::Result<bool> {
    let cfg = load_config(&args)?;
    let backends = start_backends(&cfg)?;

    // 2. The gateway.
    let (mcp, admin, endpoint) = (cfg.listen.mcp, cfg.listen.admin, cfg.endpoint.clone());
    let gateway = RunningGateway::start(cfg).context("starting the gateway")?;
    println!(
        "gateway   MCP on http://{mcp}{endpoint}{}",
        admin
            .map(|a| format!(", admin on http://{a} (console: http://{a}/ui)"))
            .unwrap_or_default()
    );

    // 3. The load test through it.
    std::fs::create_dir_all(&args.report_dir)
        .with_context(|| format!("cannot create {}", args.report_dir.display()))?;
    let html = args.report_dir.join("demo.html");
    let json = args.report_dir.join("demo.json");
    let passed = mrtr_phase(&args, &format!("http://{mcp}{endpoint}"), &html, &json)?;

    // 4. What the gateway saw.
    if let Some(admin) = admin {
        gateway_saw(admin, &json);
    }
    // 5. A short tasks phase: long-running calls followed through tasks/*.
    let tasks_passed =
        args.task_flows == 0 || tasks_phase(&args, &format!("http://{mcp}{endpoint}"), admin)?;
    let passed = passed && tasks_passed;
    if args.keep_serving {
        keep_serving(admin)?;
    }
    gateway.shutdown();
    backends.shutdown();
    println!("\nreports   {} and {}", html.display(), json.display());
    println!(
        "demo {}",
        if passed {
            "passed: every flow completed, retry legs landed across instances"
        } else {
            "FAILED: see the checks above"
        }
    );
    Ok(passed)
}

/// The gateway config: `--config`, else the embedded default.
fn load_config(args: &DemoArgs) -> anyhow::Result<Config> {
    let (text, source) = match &args.config {
        Some(p) => (
            std::fs::read_to_string(p).with_context(|| format!("cannot read {}", p.display()))?,
            p.display().to_string(),
        ),
        None => (
            EMBEDDED_DEFAULT.to_string(),
            "gateway.yaml (embedded)".to_string(),
        ),
    };
    Ok(Config::parse(&text, &source)?)
}

/// Step 1: backends on every loopback instance the config names.
fn start_backends(cfg: &Config) -> anyhow::Result<Pool> {
    let mut addrs: Vec<SocketAddr> = Vec::new();
    for pool in cfg.pools.values() {
        for inst in &pool.instances {
            let addr: SocketAddr = inst
                .parse()
                .with_context(|| format!("the demo needs ip:port instances, got {inst:?}"))?;
            anyhow::ensure!(
                addr.ip().is_loopback(),
                "the demo starts backends on loopback only; {addr} is not"
            );
            if !addrs.contains(&addr) {
                addrs.push(addr);
            }
        }
    }
    let mut opts = PoolOptions::local(addrs.len()).with_key(StateKeys::random());
    opts.listen = addrs.clone();
    let backends = Pool::start(opts).context("starting the backend pool")?;
    println!(
        "backend   {} instances sharing one state key: {}",
        backends.addrs().len(),
        join(backends.addrs())
    );
    Ok(backends)
}

/// Step 3: the MRTR load test through the gateway at `target`, its reports written to `html` and
/// `json`; whether its checks passed.
fn mrtr_phase(
    args: &DemoArgs,
    target: &str,
    html: &std::path::Path,
    json: &std::path::Path,
) -> anyhow::Result<bool> {
    let lt = LoadTestArgs {
        target: target.to_string(),
        duration: Some(args.duration),
        concurrency: args.concurrency,
        bad_share: args.bad_share,
        scenario: "mixed".into(),
        expect_cross_instance: Some(0.5),
        max_error_rate: Some(0.0),
        html: Some(html.to_path_buf()),
        json: Some(json.to_path_buf()),
        ..LoadTestArgs::default()
    };
    println!(
        "loadtest  {:?} of mixed MRTR flows, {} at a time, {:.0}% spoofed headers\n",
        args.duration,
        args.concurrency,
        args.bad_share * 100.0
    );
    crate::loadtest::run(lt)
}

/// Step 4: what the gateway saw, from its own `/metrics` on `admin` (nothing when it cannot be read),
/// and the flows beside the load test's report at `json`.
fn gateway_saw(admin: SocketAddr, json: &std::path::Path) {
    let Some(metrics) = scrape(admin) else {
        return;
    };
    println!("\nthe gateway's own /metrics:");
    for (label, name, filter) in [
        ("  requests answered", "mcp_edge_requests_total", ""),
        (
            "  header checks passed",
            "mcp_edge_header_checks_total",
            "result=\"checked\"",
        ),
        (
            "  spoofed headers refused",
            "mcp_edge_header_checks_total",
            "result=\"rejected\"",
        ),
        ("  MRTR retry legs", "mcp_edge_mrtr_retry_legs_total", ""),
        (
            "  input_required results",
            "mcp_edge_mrtr_input_required_total",
            "",
        ),
    ] {
        println!("{label:<28} {}", sum(&metrics, name, filter));
    }
    flows_side_by_side(&metrics, json);
}

/// `--keep-serving`: wait for Ctrl-C, saying where the console is.
fn keep_serving(admin: Option<SocketAddr>) -> anyhow::Result<()> {
    if let Some(a) = admin {
        println!("\nconsole   http://{a}/ui  (the gateway keeps serving; Ctrl-C ends the demo)");
    }
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?
        .block_on(tokio::signal::ctrl_c())?;
    Ok(())
}

fn join(addrs: &[SocketAddr]) -> String {
    addrs
        .iter()
        .map(|a| a.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// GET /metrics from the admin listener (plain HTTP/1.1; the demo needs nothing more).
fn scrape(admin: SocketAddr) -> Option<String> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect_timeout(&admin, Duration::from_secs(2)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    out.split_once("\r\n\r\n").map(|(_, body)| body.to_string())
}

/// The sum of the samples of `name` whose labels contain `filter`.
fn sum(text: &str, name: &str, filter: &str) -> u64 {
    text.lines()
        .filter(|l| l.split(['{', ' ']).next() == Some(name) && l.contains(filter))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

/// The load tester's truth about its multi-round flows beside what the gateway followed.
fn flows_side_by_side(metrics: &str, report: &std::path::Path) {
    let lt: serde_json::Value = std::fs::read(report)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default();
    let flows = &lt["flows"];
    // Flows of two legs or more: the gateway follows a flow from its first input_required.
    let (mut multi, mut legs) = (0u64, 0u64);
    if let Some(by_legs) = flows["by_legs"].as_object() {
        for (k, v) in by_legs {
            let (k, v) = (k.parse::<u64>().unwrap_or(0), v.as_u64().unwrap_or(0));
            if k >= 2 {
                multi += v;
                legs += k * v;
            }
        }
    }
    let per = |a: f64, b: f64| {
        if b > 0.0 {
            format!("{:.2}", a / b)
        } else {
            "-".into()
        }
    };
    let f = |name: &str, filter: &str| sum_f(metrics, name, filter);
    let gw_done = f("mcp_edge_mrtr_flows_total", "outcome=\"completed\"");
    println!("\nMRTR flows                   load tester   gateway");
    println!("  multi-round completed      {multi:<13} {gw_done}");
    println!(
        "  rounds per completed flow  {:<13} {}",
        per(legs as f64, multi as f64),
        per(
            f("mcp_edge_mrtr_flow_rounds_sum", ""),
            f("mcp_edge_mrtr_flow_rounds_count", "")
        )
    );
    println!(
        "  abandoned                  {:<13} {} (+{} still waiting; counted after flows.timeout)",
        flows["abandoned"]
            .as_u64()
            .map_or("-".into(), |n| n.to_string()),
        f("mcp_edge_mrtr_flows_total", "outcome=\"abandoned\""),
        f("mcp_edge_mrtr_flows_tracked", "")
    );
    println!(
        "  failed                     {:<13} {}",
        flows["failed"]
            .as_u64()
            .map_or("-".into(), |n| n.to_string()),
        f("mcp_edge_mrtr_flows_total", "outcome=\"failed\"")
    );
    println!(
        "  mean flow duration (s)     {:<13} {}",
        "",
        per(
            f("mcp_edge_mrtr_flow_duration_seconds_sum", ""),
            f("mcp_edge_mrtr_flow_duration_seconds_count", "")
        )
    );
}

fn sum_f(text: &str, name: &str, filter: &str) -> f64 {
    text.lines()
        .filter(|l| l.split(['{', ' ']).next() == Some(name) && l.contains(filter))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .fold(0.0, |a, b| a + b)
}

/// The `tasks` scenario for `--task-flows` flows: its Tasks section, and the gateway's counts
/// beside the load tester's. Ok(true) when every task ended and no request failed.
fn tasks_phase(args: &DemoArgs, target: &str, admin: Option<SocketAddr>) -> anyhow::Result<bool> {
    let lt = LoadTestArgs {
        target: target.to_string(),
        scenario: "tasks".into(),
        flows: Some(args.task_flows),
        duration: None,
        concurrency: args.concurrency.clamp(1, 8),
        max_error_rate: Some(0.0),
        ..LoadTestArgs::default()
    };
    println!(
        "\ntasks     {} Tasks-extension flows (deploy_async, slow_compute), {} at a time, {:.0}% cancelled",
        args.task_flows,
        lt.concurrency,
        lt.task_cancel_share * 100.0
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let report = rt.block_on(crate::loadtest::execute(&lt))?;
    print!("{}", crate::loadtest::report::tasks::text(&report));
    let t = &report.measures.tasks;
    if let Some(metrics) = admin.and_then(scrape) {
        let g = |name: &str, filter: &str| sum(&metrics, name, filter);
        println!("\nTasks                        load tester   gateway");
        for (label, ours, theirs) in [
            (
                "  created",
                t.created,
                g("mcp_edge_tasks_created_total", ""),
            ),
            (
                "  completed",
                t.completed,
                g("mcp_edge_tasks_ended_total", "status=\"completed\""),
            ),
            (
                "  cancelled",
                t.cancelled,
                g("mcp_edge_tasks_ended_total", "status=\"cancelled\""),
            ),
            (
                "  failed",
                t.failed,
                g("mcp_edge_tasks_ended_total", "status=\"failed\""),
            ),
            (
                "  task requests to owner",
                t.landing_all().owner,
                g("mcp_edge_task_routing_total", "result=\"owner\""),
            ),
        ] {
            println!("{label:<28} {ours:<13} {theirs}");
        }
    }
    let failures = report.check(&lt);
    for f in &failures {
        eprintln!("tasks check failed: {f}");
    }
    Ok(failures.is_empty() && t.created > 0 && t.ended() == t.created)
}
