//! `GET /-/history`: load sent before anyone asks shows in the gateway's own per-second points
//! (requests, errors by side, per pool and per tool, latency, the instances' load).

use serde_json::Value;
use std::time::Duration;

use crate::support::http::raw;
use crate::support::*;

fn history(gw: &mcp_edge::gateway::RunningGateway) -> Value {
    let req = "GET /-/history HTTP/1.1\r\nHost: x\r\n\r\n";
    let r = raw(gw.admin_addr.unwrap(), req.as_bytes());
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("application/json"));
    serde_json::from_slice(&r.body).unwrap()
}

fn sum(points: &Value, f: impl Fn(&Value) -> u64) -> u64 {
    points.as_array().unwrap().iter().map(f).sum()
}

#[test]
fn load_sent_before_the_fetch_is_in_the_history() {
    let up = Upstreams::start(2);
    let gw = simple_gateway(&up, "");
    for i in 0..20 {
        let r = post(gw.mcp_addr, &refs(&call_headers("echo")), &call(i, "echo"));
        assert_eq!(r.status, 200);
    }
    // Two refused by the client's fault (the name in the header is not the body's).
    for i in 0..2 {
        let r = post(
            gw.mcp_addr,
            &refs(&call_headers("echo")),
            &call(100 + i, "deploy"),
        );
        assert_eq!(r.status, 400);
    }
    // The sampler reads once a second: wait until the 22 requests are in its points.
    let mut h = Value::Null;
    let all_in = eventually(Duration::from_secs(10), || {
        h = history(&gw);
        sum(&h["seconds"]["points"], |p| p["requests"].as_u64().unwrap()) == 22
    });
    assert!(all_in, "the history never counted the 22 requests: {h:#}");
    let points = &h["seconds"]["points"];
    assert_eq!(sum(points, |p| p["errors"]["client"].as_u64().unwrap()), 2);
    assert_eq!(
        sum(points, |p| p["errors"]["upstream"].as_u64().unwrap()),
        0
    );
    let busy: Vec<&Value> = points
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["requests"].as_u64() > Some(0))
        .collect();
    for p in &busy {
        assert!(
            p["p50_ms"].as_f64().is_some() && p["p99_ms"].as_f64() >= p["p50_ms"].as_f64(),
            "{p}"
        );
        assert_eq!(p["pools"][0]["name"], "default", "{p}");
        assert_eq!(p["tools"][0]["name"], "echo", "{p}");
        assert_eq!(
            p["span_ms"].as_u64().map(|s| (500..=2_500).contains(&s)),
            Some(true),
            "{p}"
        );
    }
    let pool_requests: u64 = busy
        .iter()
        .map(|p| p["pools"][0]["requests"].as_u64().unwrap())
        .sum();
    assert_eq!(pool_requests, 22);
    // Every point names both instances, up, with their load.
    let last = points.as_array().unwrap().last().unwrap();
    let instances = last["instances"].as_array().unwrap();
    assert_eq!(instances.len(), 2, "{last}");
    assert!(
        instances
            .iter()
            .all(|i| i["up"] == true && i["pool"] == "default"),
        "{last}"
    );
    // Points are a second apart, oldest first, and the memory figure is reported.
    let ts: Vec<u64> = points
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["t"].as_u64().unwrap())
        .collect();
    assert!(ts.windows(2).all(|w| w[0] < w[1]), "{ts:?}");
    assert_eq!(h["seconds"]["capacity"], 300);
    assert!(h["memory_bytes"].as_u64().unwrap() > 0);
    // No -0 anywhere a chart could show it.
    assert!(
        !h.to_string().contains("-0.0") && !h.to_string().contains(":-0,"),
        "{h}"
    );
}
