//! The `Mcp-Param-*` header check over real sockets: the gateway learns each tool's
//! `x-mcp-header` arguments from the `tools/list` results passing through, and refuses a known
//! tool's call whose header is missing or wrong before the upstream sees it.

use crate::support;
use crate::support::cache::*;
use crate::support::http::rpc;
use crate::support::scripted::{cacheable, Script, Scripted};
use crate::support::Reply;
use mcp_edge::gateway::RunningGateway;
use serde_json::{json, Value};

fn region_tools() -> Scripted {
    Scripted::start(|req| match req["method"].as_str().unwrap_or("") {
        "tools/list" => Script::Result(
            cacheable(
                json!({"tools": [{"name": "deploy", "inputSchema": {"type": "object",
                "properties": {"region": {"type": "string", "x-mcp-header": "Region"}}}}]}),
                json!(0),
                "public",
            ),
            NOW,
        ),
        _ => Script::Result(json!({"resultType": "complete", "content": []}), NOW),
    })
}

fn deploy(gw: &RunningGateway, id: i64, args: Value, region: Option<&str>) -> Reply {
    let extra: Vec<(&str, &str)> = region
        .map(|r| vec![("Mcp-Param-Region", r)])
        .unwrap_or_default();
    rpc(
        gw.mcp_addr,
        json!(id),
        "tools/call",
        json!({"name": "deploy", "arguments": args}),
        &extra,
    )
}

#[test]
fn a_known_tools_marked_argument_needs_its_header() {
    let up = region_tools();
    let gw = gateway(&[up.addr], "");
    // Unknown tool (no tools/list seen yet): passes to the upstream.
    assert_eq!(
        deploy(&gw, 1, json!({"region": "us-west1"}), None).status,
        200
    );
    assert_eq!(up.count_method("tools/call"), 1);
    // Learn it (from a tools/list that is not even cacheable: ttlMs 0).
    assert_eq!(
        rpc(gw.mcp_addr, json!(2), "tools/list", json!({}), &[]).status,
        200
    );
    let missing = deploy(&gw, 3, json!({"region": "us-west1"}), None);
    assert_eq!((missing.status, missing.error_code()), (400, -32020));
    assert_eq!(
        missing.json()["error"]["data"]["header"],
        "Mcp-Param-Region"
    );
    assert_eq!(missing.json()["id"], 3);
    let wrong = deploy(&gw, 4, json!({"region": "us-west1"}), Some("eu-west1"));
    assert_eq!((wrong.status, wrong.error_code()), (400, -32020));
    assert_eq!(
        up.count_method("tools/call"),
        1,
        "refused calls never reach the upstream"
    );
    assert_eq!(
        deploy(&gw, 5, json!({"region": "us-west1"}), Some("us-west1")).status,
        200
    );
    assert_eq!(deploy(&gw, 6, json!({"region": null}), None).status, 200);
    assert_eq!(deploy(&gw, 7, json!({}), None).status, 200);
    assert_eq!(up.count_method("tools/call"), 4);
    let m = scrape(&gw);
    assert_eq!(
        sample(&m, "mcp_edge_cache_param_header_refusals_total", &[]),
        2.0
    );
}

#[test]
fn a_hash_pool_shards_on_a_param_header() {
    let ups: Vec<Scripted> = (0..3).map(|_| region_tools()).collect();
    let addrs: Vec<_> = ups.iter().map(|u| u.addr).collect();
    let cfg = support::config(
        &[(
            "default",
            &addrs,
            "balance: hash\n    hash_key: param:Region",
        )],
        "default_route: {pool: default}\n",
    );
    let gw = RunningGateway::start(cfg).unwrap();
    for (i, region) in ["us-west1", "eu-west1", "ap-south1", "=?x"]
        .iter()
        .enumerate()
    {
        let before: Vec<usize> = ups.iter().map(|u| u.count_method("tools/call")).collect();
        for k in 0..6 {
            let r = deploy(
                &gw,
                (i * 10 + k) as i64,
                json!({"region": region}),
                Some(region),
            );
            assert_eq!(r.status, 200, "{}", r.text());
        }
        let grew: Vec<usize> = ups
            .iter()
            .zip(&before)
            .map(|(u, b)| u.count_method("tools/call") - b)
            .collect();
        assert_eq!(
            grew.iter().filter(|n| **n > 0).count(),
            1,
            "{region}: {grew:?}"
        );
    }
}
