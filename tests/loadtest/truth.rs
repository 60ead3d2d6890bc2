//! The load tester tells the truth: a scenario tool the target lacks is refused before
//! any load (exit 2); errors are reported with the upstream's own messages; the cross-instance
//! check names the real cause; a failing run exits non-zero by default; data feeds and templates
//! vary the calls; content checks count and fail a run; ramp stages get a row each. Against the
//! in-test target (tests/support/loadtest.rs), on 127.0.0.1, bounded in flows and time.

use std::process::Command;
use std::sync::atomic::Ordering::SeqCst;

use crate::support::loadtest::{Target, TargetOptions};
use mcp_edge::loadtest::measure::LegKind;
use mcp_edge::loadtest::{execute, LoadTestArgs, PreflightError};
use serde_json::Value;

fn args(url: &str, extra: &[&str]) -> LoadTestArgs {
    let mut argv = vec!["--target", url, "--timeout", "5s", "--quiet"];
    if !extra.contains(&"--stages") && !extra.contains(&"--duration") {
        argv.extend_from_slice(&["--duration", "20s"]);
    }
    argv.extend_from_slice(extra);
    LoadTestArgs::from_cli(argv).unwrap()
}

fn tmp(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("mcp-edge-truth-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

fn cli(url: &str, extra: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_mcp-edge"))
        .args([
            "loadtest",
            "--target",
            url,
            "--timeout",
            "5s",
            "--duration",
            "20s",
            "--flows",
            "40",
        ])
        .args(extra)
        .output()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preflight_refuses_a_tool_the_target_does_not_offer() {
    let target = Target::start(TargetOptions::default()).await;
    let e = execute(&args(
        &target.url,
        &["--tool", "create_repository", "--flows", "10"],
    ))
    .await
    .unwrap_err();
    let p = e
        .downcast_ref::<PreflightError>()
        .expect("a preflight refusal");
    assert!(p.0.contains("create_repository"), "{p}");
    assert!(
        p.0.contains("create_repo, deploy, charge, onboard, echo"),
        "{p}"
    );
    // Only the preflight reached the target: server/discover and one tools/list page.
    assert_eq!(target.stats.requests.load(SeqCst), 0);
    assert_eq!(target.stats.preflight.load(SeqCst), 2);
    target.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_exits_2_on_a_preflight_refusal_and_prints_what_it_discovered() {
    let target = Target::start(TargetOptions::default()).await;
    let url = target.url.clone();
    let out = tokio::task::spawn_blocking(move || cli(&url, &["--tool", "nope"]))
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("preflight: 5 tools in 1 page(s)"),
        "{stderr}"
    );
    assert!(stderr.contains("does not offer: nope"), "{stderr}");
    assert_eq!(target.stats.requests.load(SeqCst), 0);
    target.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn error_distribution_carries_the_upstreams_messages_in_every_report() {
    let target = Target::start(TargetOptions {
        stateful: true,
        ..TargetOptions::default()
    })
    .await;
    let (json_path, html_path) = (tmp("errors.json"), tmp("errors.html"));
    let a = args(
        &target.url,
        &[
            "--scenario",
            "mrtr",
            "--concurrency",
            "4",
            "--flows",
            "120",
            "--json",
            json_path.to_str().unwrap(),
            "--html",
            html_path.to_str().unwrap(),
        ],
    );
    let r = execute(&a).await.unwrap();
    mcp_edge::loadtest::write_reports(&r, &a).unwrap();
    let refused = target.stats.retries_refused.load(SeqCst);
    assert!(refused > 0);
    let groups = r.measures.tally.error_groups();
    let (key, n) = groups[0];
    assert_eq!(key.message, "Invalid or expired requestState");
    assert_eq!(
        (key.kind, key.code, n),
        ("jsonrpc_error", Some(-32602), refused)
    );
    let text = r.summary_text();
    assert!(text.contains("Errors by message"), "{text}");
    assert!(
        text.contains(&format!(
            "{refused} × jsonrpc_error HTTP 200 code -32602 \"Invalid or expired requestState\""
        )),
        "{text}"
    );
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&json_path).unwrap()).unwrap();
    assert_eq!(
        v["error_groups"][0]["message"],
        "Invalid or expired requestState"
    );
    assert_eq!(v["error_groups"][0]["count"], refused);
    assert_eq!(v["preflight"]["tool_count"], 5);
    let html = std::fs::read_to_string(&html_path).unwrap();
    assert!(html.contains("Errors by message") && html.contains("Invalid or expired requestState"));
    // The default --max-error-rate (1%) fails this run and quotes the message.
    let failed = r.check(&a);
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert!(
        failed[0].contains("Invalid or expired requestState"),
        "{}",
        failed[0]
    );
    target.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_first_legs_are_named_as_the_cause_not_the_instance_header() {
    // The header is set on every answer; what prevents retry legs is that leg 1 always fails.
    let target = Target::start(TargetOptions::default()).await;
    let a = LoadTestArgs {
        expect_cross_instance: Some(0.5),
        ..args(
            &target.url,
            &["--no-preflight", "--tool", "ghost", "--flows", "30"],
        )
    };
    let r = execute(&a).await.unwrap();
    assert_eq!(r.measures.leg(LegKind::First).errors, 30);
    assert_eq!(r.measures.leg(LegKind::Retry).requests, 0);
    let failed = r.check(&a);
    let cross = failed
        .iter()
        .find(|f| f.contains("cross-instance"))
        .expect("cross check failed");
    assert!(
        cross.starts_with("no retry leg was sent because 30 first legs failed"),
        "{cross}"
    );
    assert!(cross.contains("\"unknown tool\""), "{cross}");
    assert!(!cross.contains("header"), "the header was present: {cross}");
    target.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_instance_header_is_named_when_it_is_the_cause() {
    let target = Target::start(TargetOptions {
        header: false,
        meta: false,
        ..TargetOptions::default()
    })
    .await;
    let a = LoadTestArgs {
        expect_cross_instance: Some(0.5),
        ..args(&target.url, &["--scenario", "create_repo", "--flows", "20"])
    };
    let r = execute(&a).await.unwrap();
    assert_eq!(r.errors(), 0, "{}", r.summary_text());
    assert_eq!(r.measures.landing.retry_unknown, 20);
    let failed = r.check(&a);
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert!(
        failed[0].contains("\"x-mcp-edge-upstream\" response header is absent")
            && failed[0].contains("of 20 retry legs"),
        "{}",
        failed[0]
    );
    target.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_run_exits_non_zero_by_default() {
    let target = Target::start(TargetOptions {
        stateful: true,
        ..TargetOptions::default()
    })
    .await;
    let url = target.url.clone();
    // No --max-error-rate: the 1% default applies.
    let out = tokio::task::spawn_blocking(move || cli(&url, &["--scenario", "mrtr", "--quiet"]))
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("allowed ≤ 1.000%"), "{stderr}");
    assert!(
        stderr.contains("Invalid or expired requestState"),
        "{stderr}"
    );
    // `none` turns the criterion off: the same failing run exits 0.
    let url = target.url.clone();
    let out = tokio::task::spawn_blocking(move || {
        cli(
            &url,
            &["--scenario", "mrtr", "--quiet", "--max-error-rate", "none"],
        )
    })
    .await
    .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    target.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn data_feeds_and_templates_vary_every_call() {
    let target = Target::start(TargetOptions::default()).await;
    let feed = tmp("words.jsonl");
    std::fs::write(&feed, "{\"word\": \"alpha\"}\n{\"word\": \"beta\"}\n").unwrap();
    for order in ["round-robin", "random"] {
        let a = args(
            &target.url,
            &[
                "--tool",
                "echo",
                "--args",
                r#"{"text": "$feed.word-$seq-$rand(1,9)-$uuid"}"#,
                "--feed",
                feed.to_str().unwrap(),
                "--feed-order",
                order,
                "--flows",
                "40",
                "--concurrency",
                "2",
                "--check",
                r"/content/0/text=~^(alpha|beta)-[0-9]+-[1-9]-[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$",
            ],
        );
        let r = execute(&a).await.unwrap();
        assert_eq!(r.errors(), 0, "{}", r.summary_text());
        let (run, failed) = r.measures.tally.check_totals();
        assert_eq!((run, failed), (40, 0), "{}", r.summary_text());
        assert!(r.check(&a).is_empty());
    }
    // A column the feed lacks is refused before the run, naming the columns it has.
    let e = execute(&args(
        &target.url,
        &[
            "--tool",
            "echo",
            "--args",
            r#"{"text": "$feed.nope"}"#,
            "--feed",
            feed.to_str().unwrap(),
            "--flows",
            "1",
        ],
    ))
    .await
    .unwrap_err();
    assert!(
        format!("{e:#}").contains("no column \"nope\" (columns: word)"),
        "{e:#}"
    );
    target.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_content_checks_are_counted_and_fail_the_run() {
    let target = Target::start(TargetOptions::default()).await;
    let a = args(
        &target.url,
        &[
            "--scenario",
            "create_repo",
            "--flows",
            "30",
            "--check",
            "no-error",
            "--check",
            "/content/0/text==Created github.com/octocat/elsewhere",
        ],
    );
    let r = execute(&a).await.unwrap();
    assert_eq!(r.errors(), 0);
    let c = &r.measures.tally.checks;
    assert_eq!(c["tools/call create_repo: isError=false"].passed, 30);
    let eq =
        &c["tools/call create_repo: /content/0/text == \"Created github.com/octocat/elsewhere\""];
    assert_eq!((eq.passed, eq.failed), (0, 30));
    assert_eq!(
        eq.sample.as_deref(),
        Some("/content/0/text is \"Created github.com/octocat/loadtest\"")
    );
    let failed = r.check(&a);
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert!(
        failed[0].contains("50.000% of content checks failed (30 of 60)"),
        "{}",
        failed[0]
    );
    assert!(r.summary_text().contains("Content checks"));
    // With the criterion off the run passes, and the counts stay in the report.
    let off = LoadTestArgs {
        max_check_failure_rate: None,
        ..a
    };
    assert!(r.check(&off).is_empty());
    target.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closed_loop_stages_report_a_row_per_stage() {
    let target = Target::start(TargetOptions::default()).await;
    let a = args(
        &target.url,
        &["--scenario", "echo", "--stages", "1s:4,1s:4,500ms:0"],
    );
    let r = execute(&a).await.unwrap();
    assert_eq!(r.errors(), 0, "{}", r.summary_text());
    let st = &r.measures.tally.stages;
    assert!(st.len() >= 2, "{}", st.len());
    assert!(
        st[0].requests > 0 && st[1].requests > 0,
        "{:?}",
        st.iter().map(|s| s.requests).collect::<Vec<_>>()
    );
    let total: u64 = st.iter().map(|s| s.requests).sum();
    assert_eq!(total, r.requests());
    let text = r.summary_text();
    assert!(
        text.contains("Stages") && text.contains("stages 1s:4,1s:4,500ms:0 (workers)"),
        "{text}"
    );
    let v = r.to_json();
    assert_eq!(v["stages"].as_array().unwrap().len(), 3);
    assert_eq!(v["stages"][1]["target"], 4.0);
    target.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_loop_stages_follow_the_ramped_rate() {
    let target = Target::start(TargetOptions::default()).await;
    // From 0 to 100 flows/s over 1 s (about 50 flows), then 100 flows/s for 1 s (about 100).
    let a = args(
        &target.url,
        &[
            "--scenario",
            "echo",
            "--rate",
            "0.001",
            "--stages",
            "1s:100,1s:100",
        ],
    );
    let r = execute(&a).await.unwrap();
    assert_eq!(r.errors(), 0, "{}", r.summary_text());
    let started = r.measures.flows_started;
    // The schedule is computed, not measured: its count does not depend on the machine's speed.
    assert!((130..=170).contains(&started), "{started} flows started");
    let st = &r.measures.tally.stages;
    assert_eq!(st.len(), 2);
    assert!(
        st[1].flows_completed > st[0].flows_completed,
        "{:?}",
        st.iter().map(|s| s.flows_completed).collect::<Vec<_>>()
    );
    assert!(r.summary_text().contains("(flows/s)"));
    target.stop().await;
}
