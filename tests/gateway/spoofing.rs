//! No request reaches an upstream saying something other than its headers. Each test
//! sends a hostile request through a gateway in front of recording upstreams, checks the
//! gateway's answer, then sends one good request and waits for it: the good request must be the
//! only one any upstream received complete (no fixed sleep stands in for "never arrived").

use std::time::Duration;

use crate::support::*;
use mcp_edge::config::Config;

const META_JSON: &str = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}"#;

/// Send `hostile` raw, expect `status` / `code`, then prove no upstream got it complete.
fn refused_and_never_delivered(hostile: &[u8], status: u16, code: i64) {
    let up = Upstreams::start(2);
    let gw = simple_gateway(&up, "");
    let r = raw(gw.mcp_addr, hostile);
    assert_eq!(r.status, status, "{}", r.text());
    assert_eq!(r.error_code(), code, "{}", r.text());
    assert!(r.header("x-mcp-edge-upstream").is_none());
    only_the_good_request_arrives(&up, &gw);
}

fn only_the_good_request_arrives(up: &Upstreams, gw: &mcp_edge::gateway::RunningGateway) {
    let h = call_headers("get_weather");
    let ok = post(gw.mcp_addr, &refs(&h), &call(4242, "get_weather"));
    assert_eq!(ok.status, 200, "{}", ok.text());
    assert!(eventually(Duration::from_secs(5), || up.count() >= 1));
    let got = up.received();
    assert_eq!(
        got.len(),
        1,
        "upstreams received more than the good request"
    );
    let v: serde_json::Value = serde_json::from_slice(&got[0].body).unwrap();
    assert_eq!(v["id"], 4242);
}

fn weather_headers() -> Vec<(&'static str, String)> {
    call_headers("get_weather")
}

#[test]
fn i12_1_a_second_name_key_in_another_case_is_refused() {
    for key in ["Name", "NAME", "nAmE"] {
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"get_weather","{key}":"deploy_prod","arguments":{{}},{META_JSON}}}}}"#
        );
        let req = post_bytes(&refs(&weather_headers()), body.as_bytes());
        refused_and_never_delivered(&req, 400, -32600);
    }
}

#[test]
fn i12_1_a_second_params_or_method_in_another_case_is_refused() {
    let params = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{{\"name\":\"get_weather\",{META_JSON}}},\"param\u{17f}\":{{\"name\":\"deploy_prod\",{META_JSON}}}}}"
    );
    refused_and_never_delivered(
        &post_bytes(&refs(&weather_headers()), params.as_bytes()),
        400,
        -32600,
    );
    let method = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","METHOD":"tools/list","params":{{"name":"get_weather",{META_JSON}}}}}"#
    );
    refused_and_never_delivered(
        &post_bytes(&refs(&weather_headers()), method.as_bytes()),
        400,
        -32600,
    );
}

#[test]
fn i12_2_a_tools_call_without_an_id_is_refused_not_passed_as_a_notification() {
    let body = format!(
        r#"{{"jsonrpc":"2.0","method":"tools/call","params":{{"name":"deploy_prod","arguments":{{}},{META_JSON}}}}}"#
    );
    let req = post_bytes(&refs(&weather_headers()), body.as_bytes());
    refused_and_never_delivered(&req, 400, -32600);
}

#[test]
fn i12_3_connection_cannot_strip_the_checked_headers() {
    let mut h = weather_headers();
    h.push((
        "Connection",
        "mcp-name, mcp-method, mcp-protocol-version".into(),
    ));
    let req = post_bytes(&refs(&h), call(1, "get_weather").as_bytes());
    refused_and_never_delivered(&req, 400, -32600);
}

#[test]
fn i12_4_a_refused_empty_body_never_reaches_an_upstream() {
    // Content-Length: 0 used to complete the upstream request before the body was checked.
    refused_and_never_delivered(&post_bytes(&refs(&weather_headers()), b""), 400, -32700);
    // And a refused body of any size below the pre-read bound.
    let spoofed = post_bytes(&refs(&weather_headers()), call(1, "deploy_prod").as_bytes());
    refused_and_never_delivered(&spoofed, 400, -32020);
}

#[test]
fn i12_5_a_route_cannot_be_checked_less_often_than_the_gateway() {
    let yaml = "pools: { p: { instances: [127.0.0.1:1] } }\nvalidation: { sample: 1.0 }\nroutes:\n  - match: { name: cheap_* }\n    pool: p\n    validation: { sample: 0.1 }\n";
    let e = Config::parse(yaml, "gateway.yaml").unwrap_err().to_string();
    assert!(e.contains("gateway.yaml:6"), "{e}");
    assert!(
        e.contains("routes[0].validation.sample") && e.contains("spoofer"),
        "{e}"
    );
    // Raising the share on a route is fine.
    let raise = "pools: { p: { instances: [127.0.0.1:1] } }\nvalidation: { sample: 0.5 }\nroutes:\n  - match: { name: deploy_* }\n    pool: p\n    validation: { sample: 1.0 }\n";
    assert!(Config::parse(raise, "gateway.yaml").is_ok());
}

#[test]
fn i12_6_header_names_with_underscores_that_fold_into_mcp_headers_are_refused() {
    let mut h = weather_headers();
    h.push(("Mcp_Name", "deploy_prod".into()));
    refused_and_never_delivered(
        &post_bytes(&refs(&h), call(1, "get_weather").as_bytes()),
        400,
        -32020,
    );
}

#[test]
fn i12_6_a_second_origin_is_refused() {
    let mut h = weather_headers();
    h.push(("Origin", "http://localhost".into()));
    h.push(("Origin", "https://evil.example".into()));
    refused_and_never_delivered(
        &post_bytes(&refs(&h), call(1, "get_weather").as_bytes()),
        400,
        -32600,
    );
}

#[test]
fn i12_6_two_identical_content_lengths_are_refused() {
    let mut h = weather_headers();
    let body = call(1, "get_weather");
    let len = body.len().to_string();
    h.push(("Content-Length", len));
    // post_bytes writes one Content-Length itself: this is the second.
    refused_and_never_delivered(&post_bytes(&refs(&h), body.as_bytes()), 400, -32600);
}

#[test]
fn i12_6_an_http11_request_without_host_is_refused() {
    let body = call(1, "get_weather");
    let mut req = format!("POST /mcp HTTP/1.1\r\nContent-Length: {}\r\n", body.len()).into_bytes();
    for (k, v) in weather_headers() {
        req.extend_from_slice(format!("{k}: {v}\r\n").as_bytes());
    }
    req.extend_from_slice(b"\r\n");
    req.extend_from_slice(body.as_bytes());
    refused_and_never_delivered(&req, 400, -32600);
}
