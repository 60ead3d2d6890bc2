//! The edge cache under load over real sockets: 200 concurrent misses make one upstream request,
//! a flood of distinct uris stays within max_bytes, and `mcp-edge loadtest` with a list-heavy
//! scenario through the gateway fetches each key at most once per TTL window.

use crate::support::cache::*;
use crate::support::http::rpc;
use crate::support::scripted::{cacheable, Script, Scripted};
use crate::support::{config, Reply};
use mcp_edge::gateway::RunningGateway;
use serde_json::json;
use std::time::Duration;

#[test]
fn two_hundred_concurrent_misses_make_one_upstream_request() {
    let up = Scripted::start(|_| {
        Script::Result(
            cacheable(json!({"tools": []}), json!(60000), "public"),
            Duration::from_millis(500),
        )
    });
    let gw = gateway(&[up.addr], "");
    let addr = gw.mcp_addr;
    let threads: Vec<_> = (0..200)
        .map(|i| std::thread::spawn(move || rpc(addr, json!(i), "tools/list", json!({}), &[])))
        .collect();
    let replies: Vec<Reply> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    for (i, r) in replies.iter().enumerate() {
        assert_eq!(r.status, 200, "{}", r.text());
        assert_eq!(r.json()["id"], i as i64);
    }
    assert_eq!(up.count_method("tools/list"), 1);
    let m = scrape(&gw);
    assert!(
        sample(&m, "mcp_edge_cache_coalesced_waits_total", &[]) >= 1.0,
        "{m}"
    );
}

#[test]
fn a_flood_of_distinct_uris_never_takes_the_cache_over_max_bytes() {
    let pad = "p".repeat(3000);
    let up = Scripted::start(move |req| {
        let uri = req["params"]["uri"].clone();
        Script::Result(
            cacheable(
                json!({"contents": [{"uri": uri, "text": pad}]}),
                json!(60000),
                "public",
            ),
            NOW,
        )
    });
    let max = 65536.0;
    let cfg = config(
        &[("default", &[up.addr], "balance: round_robin")],
        "default_route: {pool: default, cache: {max_bytes: 65536, max_entries: 1000, max_entry_bytes: 8192}}\n",
    );
    let gw = RunningGateway::start(cfg).unwrap();
    for i in 0..300 {
        let r = read(&gw, i, &format!("flood://{i}"), &[]);
        assert_eq!(r.status, 200);
        if i % 25 == 0 {
            let bytes = sample(&scrape(&gw), "mcp_edge_cache_bytes", &[]);
            assert!(bytes <= max, "after {i}: {bytes} bytes");
        }
    }
    let m = scrape(&gw);
    let bytes = sample(&m, "mcp_edge_cache_bytes", &[]);
    assert!(bytes > 0.0 && bytes <= max, "{bytes}");
    assert!(
        sample(&m, "mcp_edge_cache_evictions_total", &[]) > 0.0,
        "{m}"
    );
    // The cache's series are valid Prometheus exposition (promtool runs in CI).
    if let Some(problems) = promtool(&m) {
        assert!(problems.trim().is_empty(), "{problems}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loadtest_lists_through_the_gateway_fetch_each_key_once_per_ttl_window() {
    use mcp_edge::loadtest::{execute, LoadTestArgs};
    const TTL_MS: u128 = 1000;
    let up = Scripted::start(|req| {
        let items = json!({"items": [req["method"].clone()]});
        Script::Result(cacheable(items, json!(TTL_MS as u64), "public"), NOW)
    });
    let gw = tokio::task::block_in_place(|| gateway(&[up.addr], ""));
    let url = format!("http://{}/mcp", gw.mcp_addr);
    let scenario = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/bench/scenarios/cache-lists.yaml"
    );
    let argv = [
        "--target",
        &url,
        "--timeout",
        "5s",
        "--quiet",
        "--concurrency",
        "8",
        "--duration",
        "3s",
        "--scenario",
        scenario,
    ];
    let args = LoadTestArgs::from_cli(argv).unwrap();
    let started = std::time::Instant::now();
    let report = execute(&args).await.unwrap();
    let windows = (started.elapsed().as_millis() / TTL_MS) as usize + 1;
    assert_eq!(report.errors(), 0, "{}", report.summary_text());
    let methods = [
        "server/discover",
        "tools/list",
        "prompts/list",
        "resources/list",
        "resources/templates/list",
    ];
    for m in methods {
        let fetched = up.count_method(m);
        assert!(
            (1..=windows).contains(&fetched),
            "{m}: {fetched} upstream fetches in {windows} TTL windows"
        );
    }
    let sent = report.requests() as usize;
    let fetched = up.seen().len();
    // At least 80% hits even on a slow machine (typically over 99%).
    assert!(
        sent >= 5 * fetched,
        "{sent} requests, {fetched} reached the upstream"
    );
}
