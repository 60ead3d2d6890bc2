//! The load tester against the in-test MRTR target (127.0.0.1, ephemeral ports, bounded runs).

use std::sync::atomic::Ordering::SeqCst;
use std::time::Duration;

use crate::support::loadtest::{Target, TargetOptions};
use mcp_edge::loadtest::measure::LegKind;
use mcp_edge::loadtest::{execute, LoadTestArgs};
use mcp_edge::mcp::codes;

/// Options for a bounded run against `url`: a flow count AND a duration cap, short timeouts.
fn args(url: &str, extra: &[&str]) -> LoadTestArgs {
    let mut argv = vec!["--target", url, "--timeout", "5s", "--quiet"];
    if !extra.contains(&"--duration") {
        argv.extend_from_slice(&["--duration", "20s"]);
    }
    argv.extend_from_slice(extra);
    LoadTestArgs::from_cli(argv).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_flows_complete_and_retries_spread_over_the_round_robin() {
    let target = Target::start(TargetOptions::default()).await;
    let a = args(
        &target.url,
        &[
            "--concurrency",
            "4",
            "--flows",
            "300",
            "--scenario",
            "mixed",
        ],
    );
    let r = execute(&a).await.unwrap();
    let m = &r.measures;
    assert_eq!(r.errors(), 0, "{}", r.summary_text());
    assert_eq!(m.flows_started, 300);
    assert_eq!(m.flows_completed, 300);
    assert_eq!(r.flows_interrupted(), 0);
    // Every request the tester counted reached the target, and every retry it accepted was valid.
    assert_eq!(r.requests(), target.stats.requests.load(SeqCst));
    assert_eq!(
        m.leg(LegKind::Retry).requests,
        target.stats.retries_accepted.load(SeqCst)
    );
    assert_eq!(target.stats.retries_refused.load(SeqCst), 0);
    assert!(m.leg(LegKind::Retry).requests > 100);
    // Multi-round flows (onboard) took three legs.
    assert!(m.rounds.get(&3).copied().unwrap_or(0) > 0, "{:?}", m.rounds);
    // Round robin over 3 names with 4 workers: a retry lands elsewhere unless a multiple of 3
    // requests were served in between, about 2/3 of the time.
    let frac = r.cross_instance_fraction().unwrap();
    assert!(
        (0.45..=1.0).contains(&frac),
        "cross-instance fraction {frac}"
    );
    let l = &m.landing;
    assert_eq!(l.instances.len(), 3);
    let retries: u64 = l.instances.values().map(|c| c.retry).sum();
    for (name, c) in &l.instances {
        assert!(
            c.retry * 5 >= retries,
            "instance {name} got {} of {retries} retry legs",
            c.retry
        );
    }
    let ok = LoadTestArgs {
        max_error_rate: Some(0.0),
        expect_cross_instance: Some(0.4),
        ..a.clone()
    };
    assert!(r.check(&ok).is_empty(), "{:?}", r.check(&ok));
    let too_much = LoadTestArgs {
        expect_cross_instance: Some(1.0),
        ..a
    };
    if frac < 1.0 {
        assert_eq!(r.check(&too_much).len(), 1);
    }
    target.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_worker_over_three_instances_always_changes_instance() {
    let target = Target::start(TargetOptions::default()).await;
    let r = execute(&args(
        &target.url,
        &["--concurrency", "1", "--flows", "60", "--scenario", "mrtr"],
    ))
    .await
    .unwrap();
    assert_eq!(r.errors(), 0, "{}", r.summary_text());
    let l = &r.measures.landing;
    assert!(l.retry_known >= 60);
    assert_eq!(l.cross, l.retry_known);
    assert_eq!(r.cross_instance_fraction(), Some(1.0));
    target.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stateful_pool_fails_retry_legs_and_the_check_says_so() {
    let target = Target::start(TargetOptions {
        stateful: true,
        ..TargetOptions::default()
    })
    .await;
    let a = LoadTestArgs {
        max_error_rate: Some(0.0),
        ..args(
            &target.url,
            &["--concurrency", "4", "--flows", "150", "--scenario", "mrtr"],
        )
    };
    let r = execute(&a).await.unwrap();
    let m = &r.measures;
    let refused = target.stats.retries_refused.load(SeqCst);
    assert!(refused > 0);
    assert_eq!(m.leg(LegKind::Retry).errors, refused);
    assert_eq!(m.leg(LegKind::First).errors, 0);
    assert_eq!(
        m.errors_by_code.get(&i64::from(codes::INVALID_PARAMS)),
        Some(&refused)
    );
    assert_eq!(m.errors_by_kind.get("jsonrpc_error"), Some(&refused));
    assert!(m.flows_failed > 0);
    let failed = r.check(&a);
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert!(failed[0].contains("error rate"), "{}", failed[0]);
    assert!(r.summary_text().contains("FAIL max_error_rate"));
    target.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_are_rejected_and_counted_apart() {
    let target = Target::start(TargetOptions::default()).await;
    let r = execute(&args(
        &target.url,
        &[
            "--concurrency",
            "4",
            "--flows",
            "200",
            "--bad-share",
            "0.25",
        ],
    ))
    .await
    .unwrap();
    let m = &r.measures;
    assert!(m.bad_sent > 20, "{}", m.bad_sent);
    assert_eq!(m.bad_rejected, m.bad_sent);
    assert_eq!(target.stats.header_rejections.load(SeqCst), m.bad_sent);
    assert_eq!(r.errors(), 0, "{}", r.summary_text());
    assert_eq!(m.flows_started + m.bad_sent, 200);
    target.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sse_answers_and_meta_instance_fallback() {
    let target = Target::start(TargetOptions {
        sse: true,
        header: false,
        ..TargetOptions::default()
    })
    .await;
    let r = execute(&args(
        &target.url,
        &["--concurrency", "3", "--flows", "90", "--scenario", "mrtr"],
    ))
    .await
    .unwrap();
    assert_eq!(r.errors(), 0, "{}", r.summary_text());
    assert_eq!(r.measures.flows_completed, 90);
    // Without the header the instance comes from result _meta.
    assert!(r.measures.landing.retry_known >= 90);
    assert_eq!(r.measures.landing.retry_unknown, 0);
    target.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_any_instance_name_the_cross_instance_check_fails_with_a_reason() {
    // A header name the target does not set: the _meta fallback names the instance.
    let target = Target::start(TargetOptions::default()).await;
    let a = LoadTestArgs {
        expect_cross_instance: Some(0.5),
        upstream_header: "x-not-this-one".into(),
        ..args(
            &target.url,
            &[
                "--concurrency",
                "2",
                "--flows",
                "20",
                "--scenario",
                "create_repo",
            ],
        )
    };
    let r = execute(&a).await.unwrap();
    assert!(r.measures.landing.retry_known > 0);
    assert!(r.check(&a).is_empty());
    target.stop().await;

    // No retry legs at all: the check cannot pass, and says why.
    let target = Target::start(TargetOptions {
        header: false,
        ..TargetOptions::default()
    })
    .await;
    let a = LoadTestArgs {
        expect_cross_instance: Some(0.5),
        ..args(&target.url, &["--flows", "10", "--scenario", "plain"])
    };
    let r = execute(&a).await.unwrap();
    let failed = r.check(&a);
    assert_eq!(failed.len(), 1);
    assert!(failed[0].contains("no retry leg"), "{}", failed[0]);
    target.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_loop_shows_a_200ms_stall_in_the_high_percentiles() {
    let target = Target::start(TargetOptions {
        stall_once: Some((100, Duration::from_millis(200))),
        ..TargetOptions::default()
    })
    .await;
    let a = args(
        &target.url,
        &["--rate", "200", "--duration", "2s", "--scenario", "echo"],
    );
    let r = execute(&a).await.unwrap();
    assert_eq!(r.errors(), 0, "{}", r.summary_text());
    let first = r.latency(LegKind::First);
    assert!(first.count >= 300, "{}", first.count);
    // The stalled request waited ~200 ms, and the flows scheduled during the pause are timed
    // from their intended start, so the pause shows in the tail, not only in the max.
    assert!(first.max_ms >= 190.0, "max {} ms", first.max_ms);
    assert!(first.p999_ms >= 150.0, "p99.9 {} ms", first.p999_ms);
    assert!(first.p99_ms >= 100.0, "p99 {} ms", first.p99_ms);
    target.stop().await;

    // Now the tester itself is blocked during the pause (two flows in flight at most), so the
    // flows due during the pause are sent late: only timing from the intended start shows them.
    let target = Target::start(TargetOptions {
        stall_once: Some((100, Duration::from_millis(200))),
        ..TargetOptions::default()
    })
    .await;
    let a = LoadTestArgs {
        max_in_flight: 2,
        ..args(
            &target.url,
            &["--rate", "200", "--duration", "2s", "--scenario", "echo"],
        )
    };
    let r = execute(&a).await.unwrap();
    assert_eq!(r.errors(), 0, "{}", r.summary_text());
    let first = r.latency(LegKind::First);
    assert!(first.count >= 300, "{}", first.count);
    assert!(
        first.p99_ms >= 100.0,
        "p99 {} ms: coordinated omission hid the stall",
        first.p99_ms
    );
    target.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_target_is_an_error_not_a_hang() {
    // Bind then drop a listener: its port refuses connections.
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/mcp", l.local_addr().unwrap());
    drop(l);
    let a = LoadTestArgs {
        max_error_rate: Some(0.0),
        ..args(&url, &["--concurrency", "2", "--flows", "10"])
    };
    let r = execute(&a).await.unwrap();
    assert_eq!(r.requests(), 10);
    assert_eq!(r.errors(), 10);
    assert_eq!(r.measures.errors_by_kind.get("transport"), Some(&10));
    assert_eq!(r.check(&a).len(), 1);
}
